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
// rewrite of every lane costs O(lanes), so after an export that took d the
// next one waits at least exportDutyCycle·d (and MinInterval). At 100,000
// lanes a rewrite takes about half a second, so under steady changes the
// file is at most about ten seconds behind.
const exportDutyCycle = 20

// exporter writes the compatibility files after batches that changed them,
// at most once per MinInterval for sessions.json, and never busier than one
// twentieth of the time.
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
	rows, err := p.db.QueryContext(ctx, `SELECT `+exportColumns+` FROM lanes WHERE pruned = 0 ORDER BY session_key`)
	if err != nil {
		return fmt.Errorf("export sessions.json: %w", err)
	}
	defer rows.Close()
	fallback := newNoEscapeEncoder()
	var lane exportLane
	var buf []byte
	return writeFileAtomic(p.exports.SessionsJSON, ".sessions_*.tmp", func(w *bufio.Writer) error {
		buf = append(buf[:0], "{\n  \"_README\": "...)
		buf, err = appendString(buf, SessionsJSONReadme, fallback)
		if err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		for rows.Next() {
			if err := scanExportLane(rows, &lane); err != nil {
				return fmt.Errorf("export sessions.json: %w", err)
			}
			buf = append(buf, ",\n  "...)
			if buf, err = appendString(buf, lane.lane.SessionKey, fallback); err != nil {
				return fmt.Errorf("export sessions.json: %w", err)
			}
			buf = append(buf, ": "...)
			if buf, err = appendEntry(buf, &lane, p.exports.Location, fallback); err != nil {
				return fmt.Errorf("export sessions.json: lane %q: %w", lane.lane.SessionKey, err)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		// The read ends here, not after the file's fsync: a purge's
		// checkpoint must not wait for a snapshot held over a disk flush.
		if err := rows.Close(); err != nil {
			return fmt.Errorf("export sessions.json: %w", err)
		}
		buf = append(buf, "\n}\n"...)
		_, err := w.Write(buf)
		return err
	})
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
