package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"hermes/events"
)

// File names inside Config.Dir.
const (
	CheckpointFile = "hooks.checkpoint"
	PoisonFile     = "hooks.poison.jsonl"
)

// ReadCheckpoint returns the position stored in dir's checkpoint file and
// whether there is one.
func ReadCheckpoint(dir string) (uint64, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read hooks checkpoint: %w", err)
	}
	pos, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("hooks checkpoint %s is corrupt: %q", filepath.Join(dir, CheckpointFile), b)
	}
	return pos, true, nil
}

// AdvanceCheckpoint moves dir's checkpoint forward to pos: a node taking
// over delivery from another (the leader lease) resumes where the
// previous holders recorded they were, or where it was itself if that is
// further. A position behind the stored one changes nothing.
func AdvanceCheckpoint(dir string, pos uint64) error {
	cur, ok, err := ReadCheckpoint(dir)
	if err != nil {
		return err
	}
	if ok && cur >= pos || !ok && pos == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write hooks checkpoint: %w", err)
	}
	return writeCheckpoint(dir, pos)
}

// writeCheckpoint replaces dir's checkpoint atomically: a temporary file is
// written and synced, renamed over the old one, and the directory synced, so
// a crash leaves the old position or the new one.
func writeCheckpoint(dir string, pos uint64) error {
	f, err := os.CreateTemp(dir, CheckpointFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("write hooks checkpoint: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write hooks checkpoint: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.WriteString(strconv.FormatUint(pos, 10) + "\n"); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write hooks checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, CheckpointFile)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write hooks checkpoint: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// PoisonRecord is one line of the poison log: an event a webhook did not
// take after all its attempts.
type PoisonRecord struct {
	Time     time.Time `json:"time"`
	Webhook  string    `json:"webhook"`
	EventID  string    `json:"event_id"`
	Type     string    `json:"type"`
	Stream   string    `json:"stream"`
	Position uint64    `json:"position"`
	Attempts int       `json:"attempts"`
	Error    string    `json:"error"`
	// Envelope is the body that was POSTed (absent when it was too large).
	Envelope json.RawMessage `json:"envelope,omitempty"`
}

// poisonLog appends records to the poison log, one synced line each.
type poisonLog struct {
	mu   sync.Mutex
	path string
}

// poisonFiles serialises every writer of a poison log in this process (the
// router's appends and ScrubPoisonLog's rewrite), so a scrub loses no line.
var poisonFiles sync.Mutex

func (p *poisonLog) write(r PoisonRecord) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("poison log: %w", err)
	}
	line = append(line, '\n')
	p.mu.Lock()
	defer p.mu.Unlock()
	poisonFiles.Lock()
	defer poisonFiles.Unlock()
	f, err := os.OpenFile(p.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("poison log: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("poison log: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("poison log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("poison log: %w", err)
	}
	return nil
}

// ReadPoisonLog returns the records of dir's poison log (none when there is
// no log).
func ReadPoisonLog(dir string) ([]PoisonRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, PoisonFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read poison log: %w", err)
	}
	var out []PoisonRecord
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r PoisonRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return out, fmt.Errorf("poison log line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ScrubPoisonLog drops the bodies an erasure made stale from dir's poison
// log: every record whose event the log now holds redacted (or no longer
// holds) loses its Envelope, which may carry the erased content; the rest
// of the record stays. The file is replaced by rename (a new inode), so the
// old bytes are no longer part of any file. It returns how many records it
// scrubbed.
func ScrubPoisonLog(ctx context.Context, dir string, store events.Store) (int, error) {
	poisonFiles.Lock()
	defer poisonFiles.Unlock()
	recs, err := ReadPoisonLog(dir)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	scrubbed := 0
	var buf bytes.Buffer
	for _, r := range recs {
		if len(r.Envelope) > 0 {
			envs, err := store.ReadAll(ctx, r.Position-1, 1)
			if err != nil {
				return 0, fmt.Errorf("scrub poison log: %w", err)
			}
			if len(envs) == 0 || envs[0].Position != r.Position || envs[0].Metadata.Redacted != "" {
				r.Envelope = nil
				scrubbed++
			}
		}
		line, err := json.Marshal(r)
		if err != nil {
			return 0, fmt.Errorf("scrub poison log: %w", err)
		}
		buf.Write(append(line, '\n'))
	}
	if scrubbed == 0 {
		return 0, nil
	}
	path := filepath.Join(dir, PoisonFile)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("scrub poison log: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("scrub poison log: %w", err)
	}
	return scrubbed, syncDir(dir)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
