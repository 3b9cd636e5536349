package sessions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"hermes/domain"
	"hermes/events"
)

// SessionsJSONReadme is the sentinel Hermes writes first in sessions.json so
// nobody mistakes the routing index for the session list (Hermes #49361).
const SessionsJSONReadme = "Gateway routing index ONLY: maps messaging session keys (agent:main:<platform>:...) to active session IDs. This is NOT the session list. Browse sessions with `hermes sessions list` or the state.db transcripts; this file is rewritten by hermes from its event log and edits to it are lost."

// requestExport wakes the exporter (never blocks).
func (p *Projection) requestExport() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// exportDutyCycle bounds the share of time spent writing sessions.json: a
// rewrite of every lane costs O(lanes), so after an export that took d the
// next one waits at least exportDutyCycle·d (and MinInterval).
const exportDutyCycle = 10

// exporter writes the compatibility files after batches that changed them,
// at most once per MinInterval for sessions.json, and never busier than one
// tenth of the time.
func (p *Projection) exporter() {
	defer close(p.exporterDone)
	var last time.Time
	var took time.Duration
	for {
		select {
		case <-p.stopExporter:
			return
		case <-p.kick:
		}
		gap := max(p.exports.MinInterval, exportDutyCycle*took)
		if wait := gap - time.Since(last); wait > 0 && p.dirtyJSON.Load() {
			select {
			case <-p.stopExporter:
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		if err := p.export(context.Background()); err != nil {
			// The next batch retries; the read model itself is unaffected.
			p.dirtyJSON.Store(true)
		}
		took = time.Since(last)
	}
}

// export writes the compatibility files that changed.
func (p *Projection) export(ctx context.Context) error {
	p.exportMu.Lock()
	defer p.exportMu.Unlock()
	return p.exportLocked(ctx)
}

// exportLocked is export with exportMu held.
func (p *Projection) exportLocked(ctx context.Context) error {
	if p.dirtyJSON.Swap(false) && p.exports.SessionsJSON != "" {
		if err := p.writeSessionsJSON(ctx); err != nil {
			p.dirtyJSON.Store(true)
			return err
		}
	}
	if p.dirtyCounts.Swap(false) && p.exports.RestartFailureCounts != "" {
		if err := p.writeRestartFailureCounts(ctx); err != nil {
			p.dirtyCounts.Store(true)
			return err
		}
	}
	return nil
}

// Flush writes the compatibility files now.
func (p *Projection) Flush(ctx context.Context) error {
	p.dirtyJSON.Store(true)
	p.dirtyCounts.Store(true)
	return p.export(ctx)
}

// writeSessionsJSON streams every live lane into a new sessions.json: one
// lane's JSON at a time through a buffered file, so an export of 100k
// lanes costs kilobytes of memory, not the size of the file several times
// over (it runs after every second of changes).
func (p *Projection) writeSessionsJSON(ctx context.Context) error {
	rows, err := p.db.QueryContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE pruned = 0 ORDER BY session_key`)
	if err != nil {
		return fmt.Errorf("export sessions.json: %w", err)
	}
	defer rows.Close()
	key, entry := newNoEscapeEncoder(""), newNoEscapeEncoder("  ")
	return writeFileAtomic(p.exports.SessionsJSON, ".sessions_*.tmp", func(w *bufio.Writer) error {
		w.WriteString("{\n  \"_README\": ")
		if err := key.encode(w, SessionsJSONReadme); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		for rows.Next() {
			r, err := scanLane(rows)
			if err != nil {
				return fmt.Errorf("export sessions.json: %w", err)
			}
			w.WriteString(",\n  ")
			if err := key.encode(w, r.Lane.SessionKey); err != nil {
				return fmt.Errorf("export sessions.json: %w", err)
			}
			w.WriteString(": ")
			if err := entry.encode(w, hermesEntry(r.Lane, p.exports.Location)); err != nil {
				return fmt.Errorf("export sessions.json: lane %q: %w", r.Lane.SessionKey, err)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		// The read ends here, not after the file's fsync: a purge's
		// checkpoint must not wait for a snapshot held over a disk flush.
		if err := rows.Close(); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		_, err := w.WriteString("\n}\n")
		return err
	})
}

// noEscapeEncoder encodes values as Python's json.dump does: no HTML
// escaping of <, > and &, indented by two spaces under prefix when prefix
// is set. It reuses its buffer from one value to the next.
type noEscapeEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newNoEscapeEncoder(prefix string) *noEscapeEncoder {
	e := &noEscapeEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	if prefix != "" {
		e.enc.SetIndent(prefix, "  ")
	}
	return e
}

// encode writes v's JSON to w, without the encoder's trailing newline.
func (e *noEscapeEncoder) encode(w io.Writer, v any) error {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	_, err := w.Write(bytes.TrimRight(e.buf.Bytes(), "\n"))
	return err
}

// entry is a SessionEntry in Hermes' to_dict shape (field order as Hermes
// writes it), with naive local ISO-8601 times.
type entry struct {
	SessionKey         string         `json:"session_key"`
	SessionID          string         `json:"session_id"`
	CreatedAt          string         `json:"created_at"`
	UpdatedAt          string         `json:"updated_at"`
	DisplayName        *string        `json:"display_name"`
	Platform           *string        `json:"platform"`
	ChatType           string         `json:"chat_type"`
	InputTokens        int64          `json:"input_tokens"`
	OutputTokens       int64          `json:"output_tokens"`
	CacheReadTokens    int64          `json:"cache_read_tokens"`
	CacheWriteTokens   int64          `json:"cache_write_tokens"`
	TotalTokens        int64          `json:"total_tokens"`
	LastPromptTokens   int64          `json:"last_prompt_tokens"`
	EstimatedCostUSD   float64        `json:"estimated_cost_usd"`
	CostStatus         string         `json:"cost_status"`
	MemoryFlushed      bool           `json:"memory_flushed"`
	ExpiryFinalized    bool           `json:"expiry_finalized"`
	Suspended          bool           `json:"suspended"`
	ResumePending      bool           `json:"resume_pending"`
	ResumeReason       *string        `json:"resume_reason"`
	LastResumeMarkedAt *string        `json:"last_resume_marked_at"`
	IsFreshReset       bool           `json:"is_fresh_reset"`
	WasAutoReset       bool           `json:"was_auto_reset"`
	AutoResetReason    *string        `json:"auto_reset_reason"`
	ResetHadActivity   bool           `json:"reset_had_activity"`
	Origin             *events.Source `json:"origin"`
}

func hermesEntry(l domain.Lane, loc *time.Location) entry {
	origin := events.Source(l.Origin)
	e := entry{
		SessionKey:       l.SessionKey,
		SessionID:        l.SessionID,
		CreatedAt:        PythonISO(l.CreatedAt, loc),
		UpdatedAt:        PythonISO(l.UpdatedAt, loc),
		DisplayName:      optional(l.DisplayName),
		Platform:         optional(l.Platform),
		ChatType:         l.ChatType,
		InputTokens:      l.InputTokens,
		OutputTokens:     l.OutputTokens,
		CacheReadTokens:  l.CacheReadTokens,
		CacheWriteTokens: l.CacheWriteTokens,
		TotalTokens:      l.TotalTokens,
		LastPromptTokens: l.LastPromptTokens,
		EstimatedCostUSD: finiteCost(l.EstimatedCostUSD),
		CostStatus:       l.CostStatus,
		MemoryFlushed:    l.ExpiryFinalized,
		ExpiryFinalized:  l.ExpiryFinalized,
		Suspended:        l.Suspended,
		ResumePending:    l.ResumePending,
		ResumeReason:     optional(l.ResumeReason),
		IsFreshReset:     l.IsFreshReset,
		WasAutoReset:     l.WasAutoReset,
		AutoResetReason:  optional(l.AutoResetReason),
		ResetHadActivity: l.ResetHadActivity,
		Origin:           &origin,
	}
	if !l.LastResumeMarkedAt.IsZero() {
		s := PythonISO(l.LastResumeMarkedAt, loc)
		e.LastResumeMarkedAt = &s
	}
	return e
}

// finiteCost is c bounded to [0, domain.MaxCostUSD], NaN as 0: the lane
// fold never makes a cost sum leave that range, but a JSON file must not
// fail on a row that did (JSON has no NaN or infinity).
func finiteCost(c float64) float64 {
	if math.IsNaN(c) || c < 0 {
		return 0
	}
	return min(c, domain.MaxCostUSD)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// PythonISO formats t as Python's naive datetime.isoformat() in loc:
// microseconds only when non-zero.
func PythonISO(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

func (p *Projection) writeRestartFailureCounts(ctx context.Context) error {
	counts, err := p.RestartFailures(ctx)
	if err != nil {
		return err
	}
	if len(counts) == 0 {
		if err := os.Remove(p.exports.RestartFailureCounts); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", p.exports.RestartFailureCounts, err)
		}
		return nil
	}
	data, err := json.Marshal(counts)
	if err != nil {
		return fmt.Errorf("export restart failure counts: %w", err)
	}
	return writeFileAtomic(p.exports.RestartFailureCounts, ".restart_failure_counts_*.tmp", func(w *bufio.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomic writes what write writes to path through a buffered,
// fsynced temp file in the same directory and a rename, so readers see the
// old or the new file, never half of one. The file is private (0600).
func writeFileAtomic(path, pattern string, write func(*bufio.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
