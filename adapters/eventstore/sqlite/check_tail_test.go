package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"hermes/events"
)

// TestOpenChecksTail: Open decodes the newest events, so an undecodable
// or misplaced newest event refuses the start with ErrDamaged, while a log
// of ordinary events, or one ending in events bigger than the tail's byte
// bound, opens.
func TestOpenChecksTail(t *testing.T) {
	big := func(i int) []events.Proposed {
		return []events.Proposed{{ID: fmt.Sprintf("big-%d", i), Event: events.ResumeMarked{Reason: fmt.Sprintf("%0*d", 1<<20, i), At: t0}}}
	}
	for _, c := range []struct {
		name    string
		big     bool
		damage  string
		wantErr error
	}{
		{name: "ordinary log"},
		{name: "log ending in events past the byte bound", big: true},
		{name: "undecodable newest event", damage: `UPDATE events SET data = '{' WHERE position = (SELECT max(position) FROM events)`, wantErr: ErrDamaged},
		{name: "position counter behind the log", damage: `UPDATE sqlite_sequence SET seq = 1 WHERE name = 'events'`, wantErr: ErrDamaged},
		{name: "a hole in the positions", damage: `DELETE FROM events WHERE position = 3`, wantErr: ErrDamaged},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.db")
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 8 {
				p := touch(fmt.Sprintf("e%d", i))
				if c.big {
					p = big(i)
				}
				if _, err := s.Append(t.Context(), fmt.Sprintf("lane-%d", i), events.NoStream(), p); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if c.damage != "" {
				if _, err := rawDB(t, path).Exec(c.damage); err != nil {
					t.Fatal(err)
				}
			}
			s, err = Open(path)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("Open = %v, want %v", err, c.wantErr)
			}
		})
	}
}
