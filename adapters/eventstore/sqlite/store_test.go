package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"hermes/events"
	"hermes/testfixtures/storetest"

	"github.com/google/go-cmp/cmp"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return openTemp(t)
	})
}

// TestContractSoleWriter runs the contract on a store that trusts its
// version cache (WithSoleWriter).
func TestContractSoleWriter(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return openTemp(t, WithSoleWriter())
	})
}

func openTemp(t *testing.T, opts ...Option) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "events.db"), opts...)
}

func openAt(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func touch(ids ...string) []events.Proposed {
	ps := make([]events.Proposed, len(ids))
	for i, id := range ids {
		ps[i] = events.Proposed{ID: id, Event: events.Touched{At: t0}}
	}
	return ps
}

func mustAppend(t *testing.T, s *Store, stream string, x events.ExpectedVersion, ps []events.Proposed) events.AppendResult {
	t.Helper()
	res, err := s.Append(t.Context(), stream, x, ps)
	if err != nil {
		t.Fatalf("Append(%s, %s) error = %v", stream, x, err)
	}
	return res
}

// rawDB opens the file with the bare driver, bypassing the store.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, false, 30*time.Second))
	if err != nil {
		t.Fatalf("sql.Open error = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path)
	mustAppend(t, s, "lane-a", events.NoStream(), touch("a"))
	if _, err := s.ReadAll(t.Context(), 0, 10); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("Stat(%s) error = %v", p, err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("mode of %s = %v, want 0600", filepath.Base(p), got)
		}
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()

	foreign := filepath.Join(dir, "other.db")
	db := rawDB(t, foreign)
	if _, err := db.Exec("PRAGMA journal_mode = DELETE; CREATE TABLE notes (body TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(foreign); !errors.Is(err, ErrNotEventStore) {
		t.Errorf("Open(another SQLite database) error = %v, want ErrNotEventStore", err)
	}
	header := make([]byte, 20)
	f, err := os.Open(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(header, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if header[18] != 1 {
		t.Errorf("Open(another SQLite database) switched it to WAL (header byte 18 = %d), want the file untouched", header[18])
	}

	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database at all ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage); !errors.Is(err, ErrNotEventStore) {
		t.Errorf("Open(a text file) error = %v, want ErrNotEventStore", err)
	}

	newer := filepath.Join(dir, "newer.db")
	s, err := Open(newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db = rawDB(t, newer)
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(newer); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Open(newer schema) error = %v, want ErrNewerSchema", err)
	}
	if _, err := Open(newer, WithReadOnly()); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Open(newer schema, read-only) error = %v, want ErrNewerSchema", err)
	}

	if _, err := Open(filepath.Join(dir, "missing.db"), WithReadOnly()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing file, read-only) error = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing file, read-only) created it")
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty, WithReadOnly()); !errors.Is(err, ErrNotEventStore) {
		t.Errorf("Open(empty file, read-only) error = %v, want ErrNotEventStore", err)
	}
}

func TestReopenKeepsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with space", "events.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	first := mustAppend(t, s, "lane-a", events.NoStream(), touch("a", "b"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), "lane-a", events.AnyVersion(), touch("c")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close error = %v, want ErrClosed", err)
	}
	if _, err := s.ReadAll(t.Context(), 0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAll after Close error = %v, want ErrClosed", err)
	}
	if _, err := s.Subscribe(t.Context(), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close error = %v, want ErrClosed", err)
	}

	s = openAt(t, path)
	again := mustAppend(t, s, "lane-a", events.NoStream(), touch("a", "b"))
	if !again.Duplicate || !cmp.Equal(again.Positions, first.Positions) {
		t.Errorf("re-Append after reopen = %+v, want Duplicate at %v", again, first.Positions)
	}
	next := mustAppend(t, s, "lane-a", events.ExactVersion(2), touch("c"))
	if next.Positions[0] != 3 || next.Versions[0] != 3 {
		t.Errorf("Append after reopen = %+v, want version 3 at position 3", next)
	}
}

func TestRecordedAtComesFromTheClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	s := openTemp(t, WithClock(func() time.Time { return at }))
	mustAppend(t, s, "lane-a", events.NoStream(), touch("a"))
	envs, err := s.ReadAll(t.Context(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := envs[0].RecordedAt; !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("RecordedAt = %v, want %v in UTC", got, at)
	}
}

func TestStoreSpecificRefusals(t *testing.T) {
	s := openTemp(t)
	mustAppend(t, s, "lane-a", events.NoStream(), touch("a"))

	_, err := s.Append(t.Context(), "lane-b", events.NoStream(), touch("a"))
	if !errors.Is(err, events.ErrInvalidAppend) {
		t.Errorf("Append(id stored in another stream) error = %v, want ErrInvalidAppend", err)
	}

	huge := events.Proposed{ID: "huge", Event: events.SessionReset{DisplayName: strings.Repeat("x", MaxEventSize), At: t0}}
	_, err = s.Append(t.Context(), "lane-b", events.NoStream(), []events.Proposed{huge})
	if !errors.Is(err, events.ErrInvalidAppend) {
		t.Errorf("Append(event over MaxEventSize) error = %v, want ErrInvalidAppend", err)
	}

	wrongSchema := touch("b")
	wrongSchema[0].Metadata.SchemaVersion = 7
	_, err = s.Append(t.Context(), "lane-b", events.NoStream(), wrongSchema)
	if !errors.Is(err, events.ErrInvalidAppend) {
		t.Errorf("Append(metadata schema version 7 for a .v1 type) error = %v, want ErrInvalidAppend", err)
	}

	nilEvent := []events.Proposed{{ID: "c"}}
	_, err = s.Append(t.Context(), "lane-b", events.NoStream(), nilEvent)
	if !errors.Is(err, events.ErrInvalidAppend) {
		t.Errorf("Append(nil event) error = %v, want ErrInvalidAppend", err)
	}

	if h, _ := s.Head(t.Context()); h != 1 {
		t.Errorf("Head() = %d after refused appends, want 1", h)
	}
	envs, err := s.ReadAll(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := envs[0].Metadata.SchemaVersion; got != 1 {
		t.Errorf("stored Metadata.SchemaVersion = %d, want 1 (filled in from the type name)", got)
	}
}

// TestOneBatchIsolatesRequests queues many appends behind a lock held by
// another connection, so that the writer commits them as one batch, and
// checks each got the answer it would have got alone.
func TestOneBatchIsolatesRequests(t *testing.T) {
	for _, withConstraintFailure := range []bool{false, true} {
		t.Run(fmt.Sprintf("constraint failure %v", withConstraintFailure), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.db")
			s := openAt(t, path, WithBusyTimeout(time.Minute))
			mustAppend(t, s, "x", events.NoStream(), touch("x1", "x2"))
			mustAppend(t, s, "z", events.NoStream(), touch("z1"))

			type call struct {
				name   string
				stream string
				x      events.ExpectedVersion
				ps     []events.Proposed
				check  func(events.AppendResult, error) string
			}
			ok := func(versions ...uint64) func(events.AppendResult, error) string {
				return func(res events.AppendResult, err error) string {
					if err != nil || res.Duplicate || !cmp.Equal(res.Versions, versions) {
						return fmt.Sprintf("= %+v, %v; want versions %v", res, err, versions)
					}
					return ""
				}
			}
			duplicate := func(versions ...uint64) func(events.AppendResult, error) string {
				return func(res events.AppendResult, err error) string {
					if err != nil || !res.Duplicate || !cmp.Equal(res.Versions, versions) {
						return fmt.Sprintf("= %+v, %v; want duplicate at versions %v", res, err, versions)
					}
					return ""
				}
			}
			fails := func(target error) func(events.AppendResult, error) string {
				return func(res events.AppendResult, err error) string {
					if !errors.Is(err, target) {
						return fmt.Sprintf("= %+v, %v; want %v", res, err, target)
					}
					return ""
				}
			}
			fresh := make([]string, maxRowsPerInsert+10)
			for i := range fresh {
				fresh[i] = fmt.Sprintf("c%d", i)
			}
			big := make([]string, maxRowsPerInsert+44)
			bigVersions := make([]uint64, len(big))
			for i := range big {
				big[i], bigVersions[i] = fmt.Sprintf("b%d", i), uint64(i)+1
			}
			calls := []call{
				{"new stream", "y", events.NoStream(), touch("y1", "y2"), ok(1, 2)},
				{"wrong version", "x", events.ExactVersion(1), touch("w1"), fails(events.ErrWrongExpectedVersion)},
				{"retry of a stored append", "x", events.NoStream(), touch("x1", "x2"), duplicate(1, 2)},
				{"follows the stored stream", "x", events.ExactVersion(2), touch("x3"), ok(3)},
				{"retry of an append earlier in the batch", "x", events.ExactVersion(2), touch("x3"), duplicate(3)},
				{"more rows than one INSERT", "big", events.NoStream(), touch(big...), ok(bigVersions...)},
			}
			if withConstraintFailure {
				calls = append(calls,
					call{"partial duplicate", "z", events.ExactVersion(1), touch("z1", "z2"), fails(events.ErrInvalidAppend)},
					call{"id of another stream", "v", events.NoStream(), touch("x1"), fails(events.ErrInvalidAppend)},
					call{"same stream, earlier in the batch", "z", events.AnyVersion(), touch("z3"), ok(2)},
					call{"more rows than one INSERT, last one stored", "big2", events.NoStream(), touch(append(fresh, "z3")...), fails(events.ErrInvalidAppend)},
				)
			}

			lock := rawDB(t, path)
			lock.SetMaxOpenConns(1)
			if _, err := lock.Exec("BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			// The first request takes the writer into BEGIN IMMEDIATE, where
			// it waits for the lock; the calls queue behind it meanwhile.
			submit := func(stream string, x events.ExpectedVersion, ps []events.Proposed) *request {
				r, err := newRequest(context.Background(), stream, x, ps)
				if err != nil {
					t.Fatal(err)
				}
				r.reply = make(chan reply, 1)
				s.w.reqs <- r
				return r
			}
			first := submit("first", events.NoStream(), touch("f1"))
			for len(s.w.reqs) != 0 {
				runtime.Gosched()
			}
			queued := make([]*request, len(calls))
			for i, c := range calls {
				queued[i] = submit(c.stream, c.x, c.ps)
			}
			if _, err := lock.Exec("COMMIT"); err != nil {
				t.Fatal(err)
			}
			if rep := <-first.reply; rep.err != nil {
				t.Fatalf("first append error = %v", rep.err)
			}
			for i, c := range calls {
				rep := <-queued[i].reply
				if msg := c.check(rep.res, rep.err); msg != "" {
					t.Errorf("Append(%s: %s) %s", c.name, c.stream, msg)
				}
			}
			if _, err := s.ReadStream(t.Context(), "big2", 0, 1, events.Forwards); !errors.Is(err, events.ErrStreamNotFound) {
				t.Errorf("ReadStream(big2) error = %v, want ErrStreamNotFound: a refused append left rows behind", err)
			}
			all, err := s.ReadAll(t.Context(), 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range all {
				if e.Position != uint64(i)+1 {
					t.Fatalf("ReadAll: position %d at index %d, want contiguous positions", e.Position, i)
				}
			}
		})
	}
}

// TestCacheSeesOtherWriters appends to one stream through two stores on the
// same file: each writer must notice the other's commits, or it would accept
// a stale expected version or collide on (stream, version). With
// WithSoleWriter (a promise these stores break) the writers do not look for
// the other's commits, and the log must still neither fork nor refuse a
// valid append.
func TestCacheSeesOtherWriters(t *testing.T) {
	for name, opts := range map[string][]Option{"data version read": nil, "sole writer": {WithSoleWriter()}} {
		t.Run(name, func(t *testing.T) {
			// Given two stores on one file, each having appended once.
			path := filepath.Join(t.TempDir(), "events.db")
			a, b := openAt(t, path, opts...), openAt(t, path, opts...)
			mustAppend(t, a, "lane-x", events.NoStream(), touch("1"))
			mustAppend(t, b, "lane-x", events.ExactVersion(1), touch("2"))

			// When the first appends at the version it last saw, then
			// at any version, then the second at the resulting one.
			_, err := a.Append(t.Context(), "lane-x", events.ExactVersion(1), touch("3"))

			// Then the stale expectation is refused with the stream's
			// actual version, and the others get the next versions.
			var wv *events.WrongVersionError
			if !errors.As(err, &wv) || wv.Actual != 2 {
				t.Fatalf("Append(version 1) on a stream another store moved to 2: error = %v, want a WrongVersionError at 2", err)
			}
			if res := mustAppend(t, a, "lane-x", events.AnyVersion(), touch("4")); res.Versions[0] != 3 {
				t.Errorf("Append(any) = version %d, want 3", res.Versions[0])
			}
			if res := mustAppend(t, b, "lane-x", events.ExactVersion(3), touch("5")); res.Versions[0] != 4 {
				t.Errorf("Append(version 3) through the other store = version %d, want 4", res.Versions[0])
			}
			if res := mustAppend(t, a, "lane-x", events.ExactVersion(4), touch("6")); res.Versions[0] != 5 {
				t.Errorf("Append(version 4) after the other store's append = version %d, want 5", res.Versions[0])
			}
		})
	}
}

// TestReadOnlyTailsAnotherWriter is the CLI story: a read-only store on the
// file a server appends to reads the log and follows it by polling.
func TestReadOnlyTailsAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	w := openAt(t, path)
	mustAppend(t, w, "lane-a", events.NoStream(), touch("a"))

	r := openAt(t, path, WithReadOnly(), WithPollInterval(time.Millisecond))
	if _, err := r.Append(t.Context(), "lane-a", events.AnyVersion(), touch("b")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Append on a read-only store error = %v, want ErrReadOnly", err)
	}
	sub, err := r.Subscribe(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustAppend(t, w, "lane-a", events.ExactVersion(1), touch("c"))
	for want := uint64(1); want <= 2; want++ {
		select {
		case e := <-sub.Events():
			if e.Position != want {
				t.Fatalf("read-only subscription delivered %d, want %d", e.Position, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("read-only subscription did not deliver position %d", want)
		}
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	later := openAt(t, path, WithReadOnly())
	envs, err := later.ReadStream(t.Context(), "lane-a", 0, 10, events.Backwards)
	if err != nil || len(envs) != 2 {
		t.Fatalf("ReadStream on a read-only store after the writer closed = %d events, %v; want 2", len(envs), err)
	}
}

// TestCloseFlushesQueuedAppends closes the store under concurrent appends:
// every append either committed (and survives a reopen) or was told
// ErrClosed.
func TestCloseFlushesQueuedAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 16
	var (
		mu    sync.Mutex
		acked = map[string]uint64{}
		wg    sync.WaitGroup
	)
	started := make(chan struct{}, writers)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := s.Append(context.Background(), fmt.Sprintf("lane-%d", w), events.AnyVersion(), touch(id))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append error = %v", err)
					return
				}
				mu.Lock()
				acked[id] = res.Positions[0]
				mu.Unlock()
				if i == 0 {
					started <- struct{}{}
				}
			}
		})
	}
	for range writers {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	s = openAt(t, path)
	all, err := s.ReadAll(t.Context(), 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]uint64{}
	for _, e := range all {
		stored[e.ID] = e.Position
	}
	for id, pos := range acked {
		if stored[id] != pos {
			t.Errorf("acknowledged append %s at %d: stored at %d", id, pos, stored[id])
		}
	}
}

// TestAppendsSpanningStatements appends requests whose rows need several
// INSERT statements and checks the positions handed back against the log.
func TestAppendsSpanningStatements(t *testing.T) {
	s := openTemp(t)
	for i, n := range []int{1000, 130, 65, 64, 1} {
		ids := make([]string, n)
		for k := range ids {
			ids[k] = fmt.Sprintf("a%d-%d", i, k)
		}
		stream := fmt.Sprintf("lane-%d", i)
		res := mustAppend(t, s, stream, events.NoStream(), touch(ids...))
		envs, err := s.ReadStream(t.Context(), stream, 1, n+1, events.Forwards)
		if err != nil {
			t.Fatal(err)
		}
		if len(envs) != n {
			t.Fatalf("ReadStream(%s) = %d events, want %d", stream, len(envs), n)
		}
		for k, e := range envs {
			if e.ID != ids[k] || e.Version != res.Versions[k] || e.Position != res.Positions[k] {
				t.Fatalf("event %d of %s stored as (%s, v%d, p%d), append answered (%s, v%d, p%d)", k, stream, e.ID, e.Version, e.Position, ids[k], res.Versions[k], res.Positions[k])
			}
		}
	}
}
