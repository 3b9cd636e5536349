package node

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/adapters/eventstore/postgres"
	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/testfixtures"
	emulator "hermes/testfixtures/kurrentdb"
	"hermes/testfixtures/ondisk"
	pgtest "hermes/testfixtures/postgres"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// copyStores are the stores a copy goes between in the tests.
var copyStores = map[string]func(t *testing.T) events.Store{
	"sqlite": func(t *testing.T) events.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	},
	"postgres": func(t *testing.T) events.Store {
		s, err := postgres.Open(t.Context(), pgtest.Shared(t).NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	},
	"kurrentdb": func(t *testing.T) events.Store {
		srv, err := emulator.Start(emulator.WithMaxAppendSize(8 << 20))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		s, err := kurrentdb.Open(t.Context(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	},
}

// copyHistory fills s with a generated history of n events and one
// transcript whose messages hold marker, erased (deleted) after them.
func copyHistory(t *testing.T, s events.Store, n int, marker string) {
	t.Helper()
	o := testfixtures.HistoryOptions{Events: n, Lanes: 20, Seed: 7, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	err := testfixtures.GenerateHistory(o, func(b testfixtures.Batch) error {
		// UUIDs, as hermes' commands derive them (KurrentDB takes no other).
		for i := range b.Proposed {
			b.Proposed[i].ID = eventID(b.Proposed[i].ID)
		}
		_, err := s.Append(t.Context(), b.Stream, events.AnyVersion(), b.Proposed)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	erasedTranscript(t, s, "erased-1", marker, true)
}

// erasedTranscript appends a transcript of two messages holding marker
// and, when erase is set, its erasure.
func erasedTranscript(t *testing.T, s events.Store, sid, marker string, erase bool) {
	t.Helper()
	at := testfixtures.Date(2026, 2, 1, 0, 0, 0, 0)
	stream := events.TranscriptStream(sid)
	msg := func(i int) events.Proposed {
		content, _ := json.Marshal("message about " + marker)
		return events.Proposed{ID: eventID(fmt.Sprintf("%s/m%d", sid, i)),
			Event:    events.MessageAppended{SessionID: sid, Message: events.Message{Role: "user", Content: content}, At: at},
			Metadata: events.Metadata{SchemaVersion: 1, Command: "append_message"}}
	}
	if _, err := s.Append(t.Context(), stream, events.AnyVersion(), []events.Proposed{msg(1), msg(2)}); err != nil {
		t.Fatal(err)
	}
	if erase {
		eraseTranscript(t, s, sid)
	}
}

func eraseTranscript(t *testing.T, s events.Store, sid string) {
	t.Helper()
	x := events.Proposed{ID: eventID(sid + "/erased"),
		Event:    events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: testfixtures.Date(2026, 2, 2, 0, 0, 0, 0)},
		Metadata: events.Metadata{SchemaVersion: 1, Command: "delete_transcript"}}
	if _, err := s.Append(t.Context(), events.TranscriptStream(sid), events.AnyVersion(), []events.Proposed{x}); err != nil {
		t.Fatal(err)
	}
}

// eventID is a UUID-shaped id derived from name (KurrentDB takes only
// UUIDs).
func eventID(name string) string {
	h := sha1.Sum([]byte("copy-test/" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func allRecords(t *testing.T, s events.Store) []events.Record {
	t.Helper()
	var out []events.Record
	var at uint64
	for {
		recs, err := s.(events.RecordStore).ReadRecords(t.Context(), at, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		at = recs[len(recs)-1].Position
	}
}

func holding(recs []events.Record, marker string) int {
	n := 0
	for _, r := range recs {
		if bytes.Contains(r.Data, []byte(marker)) || bytes.Contains(r.Metadata, []byte(marker)) {
			n++
		}
	}
	return n
}

// TestCopyLog copies a log between the pairs hermes store copy supports:
// every event arrives with its id, stream, version, type, data, metadata
// and time, in the same order; the erased transcript arrives erased; a
// second copy writes nothing; the events read back as events (the time
// included).
func TestCopyLog(t *testing.T) {
	for _, tt := range []struct{ from, to string }{
		{"sqlite", "postgres"},
		{"sqlite", "kurrentdb"},
		{"postgres", "sqlite"},
	} {
		t.Run(tt.from+"-to-"+tt.to, func(t *testing.T) {
			marker := ondisk.RandomMarker(t, "copy")
			src, dst := copyStores[tt.from](t), copyStores[tt.to](t)
			copyHistory(t, src, 1500, marker)
			want := allRecords(t, src)

			rep, err := CopyLog(t.Context(), src, dst, CopyOptions{Batch: 100})
			if err != nil {
				t.Fatalf("CopyLog() error = %v", err)
			}
			if rep.Copied != len(want) || rep.Already != 0 || rep.Verified.Events != len(want) {
				t.Errorf("CopyLog() = %+v, want %d copied and verified", rep, len(want))
			}
			got := allRecords(t, dst)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(events.Record{}, "Position")); diff != "" {
				t.Fatalf("the target's records (-source +target):\n%s", diff)
			}
			if n := holding(want, marker); n != 0 {
				t.Fatalf("the source holds the erased marker in %d events", n)
			}
			wantEnvs, err := src.ReadAll(t.Context(), 0, 5)
			if err != nil {
				t.Fatal(err)
			}
			gotEnvs, err := dst.ReadAll(t.Context(), 0, 5)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantEnvs, gotEnvs, cmpopts.IgnoreFields(events.Envelope{}, "Position")); diff != "" {
				t.Errorf("the target's first events (-source +target):\n%s", diff)
			}

			again, err := CopyLog(t.Context(), src, dst, CopyOptions{})
			if err != nil || again.Copied != 0 || again.Already != len(want) {
				t.Errorf("second CopyLog() = %+v, %v; want nothing copied, %d already there", again, err, len(want))
			}
		})
	}
}

// TestCopyLogResumes: a copy that stopped half way (a prefix written) is
// completed, writing only the rest; a source that went on (new events, an
// erasure of events already copied) is followed, the erased events
// rewritten on the target too and, on a store that erases in place, purged.
func TestCopyLogResumes(t *testing.T) {
	for _, to := range []string{"postgres", "sqlite", "kurrentdb"} {
		t.Run(to, func(t *testing.T) {
			marker := ondisk.RandomMarker(t, "later")
			src, dst := copyStores["sqlite"](t), copyStores[to](t)
			copyHistory(t, src, 600, ondisk.RandomMarker(t, "first"))
			all := allRecords(t, src)
			// A copy killed after its first transactions left a prefix.
			if err := dst.(events.RecordStore).WriteRecords(t.Context(), all[:250]); err != nil {
				t.Fatal(err)
			}
			rep, err := CopyLog(t.Context(), src, dst, CopyOptions{Batch: 64})
			if err != nil || rep.Already != 250 || rep.Copied != len(all)-250 {
				t.Fatalf("CopyLog() after a prefix = %+v, %v; want 250 already there, %d copied", rep, err, len(all)-250)
			}

			erasedTranscript(t, src, "later-1", marker, false)
			if rep, err := CopyLog(t.Context(), src, dst, CopyOptions{}); err != nil || rep.Copied != 2 {
				t.Fatalf("CopyLog() after two more events = %+v, %v; want 2 copied", rep, err)
			}
			if n := holding(allRecords(t, dst), marker); n != 2 {
				t.Fatalf("before the erasure the target holds the marker in %d events, want 2", n)
			}
			eraseTranscript(t, src, "later-1")
			rep, err = CopyLog(t.Context(), src, dst, CopyOptions{})
			if to == "kurrentdb" {
				// It cannot rewrite the events it holds: the verification
				// says which stream differs.
				if err == nil || !strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), events.TranscriptStream("later-1")) {
					t.Fatalf("CopyLog() to KurrentDB after the erasure = %+v, %v; want the verification to fail on %s", rep, err, events.TranscriptStream("later-1"))
				}
				return
			}
			if err != nil || rep.Copied != 1 || rep.ErasedSince != 2 {
				t.Fatalf("CopyLog() after the erasure = %+v, %v; want 1 copied, 2 erased since", rep, err)
			}
			if n := holding(allRecords(t, dst), marker); n != 0 {
				t.Errorf("after the erasure was copied the target holds the marker in %d events", n)
			}
			if diff := cmp.Diff(allRecords(t, src), allRecords(t, dst), cmpopts.IgnoreFields(events.Record{}, "Position")); diff != "" {
				t.Errorf("the target's records (-source +target):\n%s", diff)
			}
		})
	}
}

// TestCopyLogRefusesAnotherLog: a target holding events that are not the
// source's first ones (another log, or a copy that went on by itself) is
// refused with ErrNotACopy, and nothing is written to it.
func TestCopyLogRefusesAnotherLog(t *testing.T) {
	src := copyStores["sqlite"](t)
	copyHistory(t, src, 300, "m")
	tests := []struct {
		name  string
		given func(t *testing.T, dst events.Store)
	}{
		{"another log", func(t *testing.T, dst events.Store) {
			erasedTranscript(t, dst, "other", "x", false)
		}},
		{"a copy that went on", func(t *testing.T, dst events.Store) {
			if _, err := CopyLog(t.Context(), src, dst, CopyOptions{}); err != nil {
				t.Fatal(err)
			}
			erasedTranscript(t, dst, "written-on-the-copy", "x", false)
		}},
		{"a copy with an event changed", func(t *testing.T, dst events.Store) {
			recs := allRecords(t, src)[:10]
			recs[9].Data = []byte(`{"changed":true}`)
			if err := dst.(events.RecordStore).WriteRecords(t.Context(), recs); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := copyStores["postgres"](t)
			tt.given(t, dst)
			before := allRecords(t, dst)
			_, err := CopyLog(t.Context(), src, dst, CopyOptions{})
			if !errors.Is(err, ErrNotACopy) {
				t.Fatalf("CopyLog() error = %v, want ErrNotACopy", err)
			}
			if diff := cmp.Diff(before, allRecords(t, dst)); diff != "" {
				t.Errorf("the refused target changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCopyLogVerifies: the verification compares what is on the target
// with the source, so a target changed behind the copy's back fails it.
func TestCopyLogVerifies(t *testing.T) {
	src := copyStores["sqlite"](t)
	copyHistory(t, src, 200, "m")
	dst := copyStores["sqlite"](t)
	recs := allRecords(t, src)
	d1, err := digestLog(t.Context(), src.(events.RecordStore), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.(events.RecordStore).WriteRecords(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	d2, err := digestLog(t.Context(), dst.(events.RecordStore), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := d1.diff(d2); diff != "" {
		t.Fatalf("digests of equal logs differ: %s", diff)
	}
	changed := copyStores["sqlite"](t)
	recs[len(recs)-1].RecordedAt = recs[len(recs)-1].RecordedAt.Add(time.Nanosecond)
	if err := changed.(events.RecordStore).WriteRecords(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	d3, err := digestLog(t.Context(), changed.(events.RecordStore), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := d1.diff(d3); diff == "" {
		t.Error("digests of logs whose last event's time differs by 1 ns are equal")
	}
}

func TestParseCopyEnd(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg      string
		wantURL  string
		wantPath string
		wantHome string
		wantErr  bool
	}{
		{arg: "postgres://db/hermes", wantURL: "postgres://db/hermes"},
		{arg: "esdb://localhost:2113?tls=false", wantURL: "esdb://localhost:2113?tls=false"},
		{arg: home, wantPath: Home{Dir: home}.EventsDB(), wantHome: home},
		{arg: filepath.Join(dir, "new-home"), wantPath: Home{Dir: filepath.Join(dir, "new-home")}.EventsDB(), wantHome: filepath.Join(dir, "new-home")},
		{arg: filepath.Join(dir, "copy.db"), wantPath: filepath.Join(dir, "copy.db")},
		{arg: "sqlite://" + filepath.Join(dir, "x.db"), wantPath: filepath.Join(dir, "x.db")},
		{arg: Home{Dir: home}.EventsDB(), wantPath: Home{Dir: home}.EventsDB(), wantHome: home},
		{arg: file, wantErr: true},
		{arg: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseCopyEnd(tt.arg)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseCopyEnd(%q) error = %v, want error %v", tt.arg, err, tt.wantErr)
			continue
		}
		gotHome := ""
		if got.Home != nil {
			gotHome = got.Home.Dir
		}
		if got.Spec.URL != tt.wantURL || got.Path != tt.wantPath || gotHome != tt.wantHome {
			t.Errorf("ParseCopyEnd(%q) = url %q, path %q, home %q; want %q, %q, %q", tt.arg, got.Spec.URL, got.Path, gotHome, tt.wantURL, tt.wantPath, tt.wantHome)
		}
	}
}
