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
// rewrite of every lane costs O(lanes), so after an export that kept the
// exporter busy for d the next one waits at least exportDutyCycle·d (and
// MinInterval). At 100,000 lanes a rewrite takes about half a second of
// CPU, so under steady changes the file trails by about ten seconds.
const exportDutyCycle = 20

// exportPace spreads a background rewrite: after each chunk of lanes the
// exporter rests exportPace times as long as the chunk took, so it never
// takes more than a quarter of a core at once instead of a whole core for
// half a second at 100,000 lanes. (Resolves over HTTP have a p99 of about
// 19 ms without the export and 21-22 ms with it, paced or not: the pacing
// did not move it, measured back to back; see BENCHMARKS.md.)
const exportPace = 3

// exportChunk is how many lanes one read of a rewrite takes. Each chunk is
// its own short read, so a rewrite never holds a snapshot of lanes.db for
// long (the WAL could not be checkpointed past it meanwhile).
var exportChunk = 1024

// exporter writes the compatibility files after batches that changed them,
// at most once per MinInterval for sessions.json, and never busier than one
// twentieth of the time.
func (p *Projection) exporter() {
	defer close(p.exporterDone)
	var last time.Time
	var busy time.Duration
	for {
		select {
		case <-p.stopExporter:
			return
		case <-p.kick:
		}
		gap := max(p.exports.MinInterval, exportDutyCycle*busy)
		if wait := gap - time.Since(last); wait > 0 && p.dirtyJSON.Load() {
			select {
			case <-p.stopExporter:
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		var err error
		busy, err = p.export(context.Background(), p.stopExporter)
		if err != nil {
			// The next batch retries; the read model itself is unaffected.
			p.dirtyJSON.Store(true)
		}
	}
}

// export writes the compatibility files that changed, paced (exportPace)
// until pace is closed; nil pace: at full speed. It returns the time spent
// working, rests left out.
func (p *Projection) export(ctx context.Context, pace <-chan struct{}) (time.Duration, error) {
	p.exportMu.Lock()
	defer p.exportMu.Unlock()
	return p.exportLocked(ctx, pace)
}

// exportLocked is export with exportMu held.
func (p *Projection) exportLocked(ctx context.Context, pace <-chan struct{}) (time.Duration, error) {
	var busy time.Duration
	if p.dirtyJSON.Swap(false) && p.exports.SessionsJSON != "" {
		var err error
		if busy, err = p.writeSessionsJSON(ctx, pace); err != nil {
			p.dirtyJSON.Store(true)
			return busy, err
		}
	}
	if p.dirtyCounts.Swap(false) && p.exports.RestartFailureCounts != "" {
		if err := p.writeRestartFailureCounts(ctx); err != nil {
			p.dirtyCounts.Store(true)
			return busy, err
		}
	}
	return busy, nil
}

// Flush writes the compatibility files now.
func (p *Projection) Flush(ctx context.Context) error {
	p.dirtyJSON.Store(true)
	p.dirtyCounts.Store(true)
	_, err := p.export(ctx, nil)
	return err
}

// writeSessionsJSON streams every live lane into a new sessions.json, a
// chunk of lanes at a time in key order through a buffered file, so an
// export of 100k lanes costs kilobytes of memory, not the size of the file
// several times over (it runs after every few seconds of changes). Each
// entry is a lane as one read saw it; a lane created during the rewrite
// may be left for the next one, which its change asked for. With pace it
// rests between chunks (exportPace) until pace is closed. It returns the
// time spent working.
func (p *Projection) writeSessionsJSON(ctx context.Context, pace <-chan struct{}) (time.Duration, error) {
	fallback := newNoEscapeEncoder()
	var (
		lane  exportLane
		buf   []byte
		busy  time.Duration
		after string
		lanes int
	)
	writeChunk := func(w *bufio.Writer) error {
		rows, err := p.db.QueryContext(ctx, `SELECT `+exportColumns+` FROM lanes WHERE pruned = 0 AND session_key > ? ORDER BY session_key LIMIT ?`, after, exportChunk)
		if err != nil {
			return err
		}
		defer rows.Close()
		lanes = 0
		for rows.Next() {
			if err := scanExportLane(rows, &lane); err != nil {
				return err
			}
			lanes++
			after = lane.lane.SessionKey
			buf = append(buf, ",\n  "...)
			if buf, err = appendString(buf, lane.lane.SessionKey, fallback); err != nil {
				return err
			}
			buf = append(buf, ": "...)
			if buf, err = appendEntry(buf, &lane, p.exports.Location, fallback); err != nil {
				return fmt.Errorf("lane %q: %w", lane.lane.SessionKey, err)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// The read ends here, not after a rest or the file's fsync: a
		// purge's checkpoint must not wait for a snapshot held that long.
		return rows.Close()
	}
	err := writeFileAtomic(p.exports.SessionsJSON, ".sessions_*.tmp", func(w *bufio.Writer) error {
		started := time.Now()
		buf = append(buf[:0], "{\n  \"_README\": "...)
		var err error
		if buf, err = appendString(buf, SessionsJSONReadme, fallback); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		for {
			if err := writeChunk(w); err != nil {
				return fmt.Errorf("export sessions.json: %w", err)
			}
			took := time.Since(started)
			busy += took
			if lanes < exportChunk {
				break
			}
			if pace != nil {
				select {
				case <-pace:
					pace = nil // stopping: the rest at full speed
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(exportPace * took):
				}
			}
			started = time.Now()
		}
		buf = append(buf, "\n}\n"...)
		_, err = w.Write(buf)
		return err
	})
	return busy, err
}

// noEscapeEncoder encodes values as Python's json.dump does: no HTML
// escaping of <, > and &. It reuses its buffer from one value to the next.
type noEscapeEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newNoEscapeEncoder() *noEscapeEncoder {
	e := &noEscapeEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
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

// finiteCost is c bounded to [0, domain.MaxCostUSD], NaN as 0: the lane
// fold never makes a cost sum leave that range, but a JSON file must not
// fail on a row that did (JSON has no NaN or infinity).
func finiteCost(c float64) float64 {
	if math.IsNaN(c) || c < 0 {
		return 0
	}
	return min(c, domain.MaxCostUSD)
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
