package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hermes/events"
)

// waitIdle returns once the writer waits for work and lets an appender
// commit inline.
func waitIdle(w *writer) {
	for !w.idle.Load() {
		runtime.Gosched()
	}
}

func inlinedAppends(w *writer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inlined
}

// TestLoneAppenderCommitsInline appends from one goroutine to an idle
// writer: every append is committed on the caller's goroutine, answered
// with its places, and published to subscriptions in order.
func TestLoneAppenderCommitsInline(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithSoleWriter()}} {
		t.Run(fmt.Sprintf("%d options", len(opts)), func(t *testing.T) {
			s := openTemp(t, opts...)
			sub, err := s.Subscribe(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			waitIdle(s.w)

			const appends = 20
			for i := range appends {
				res := mustAppend(t, s, "lane", events.ExactVersion(uint64(i)), touch(fmt.Sprintf("e%d", i)))
				if res.Versions[0] != uint64(i)+1 || res.Positions[0] != uint64(i)+1 {
					t.Fatalf("Append #%d = version %d, position %d; want %d, %d", i, res.Versions[0], res.Positions[0], i+1, i+1)
				}
			}
			if got := inlinedAppends(s.w); got != appends {
				t.Errorf("appends committed inline = %d, want %d (every append of a lone appender)", got, appends)
			}
			if _, err := s.Append(t.Context(), "lane", events.ExactVersion(1), touch("stale")); !errors.As(err, new(*events.WrongVersionError)) {
				t.Errorf("Append with a stale version error = %v, want WrongVersionError", err)
			}
			if res := mustAppend(t, s, "lane", events.ExactVersion(1), touch("e1")); !res.Duplicate || res.Versions[0] != 2 {
				t.Errorf("retried Append = %+v, want a duplicate at version 2", res)
			}
			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := s.Append(cancelled, "lane", events.AnyVersion(), touch("never")); !errors.Is(err, context.Canceled) {
				t.Errorf("Append with a cancelled context error = %v, want context.Canceled", err)
			}
			for i := range appends {
				e, ok := <-sub.Events()
				if !ok {
					t.Fatalf("subscription ended after %d of %d events: %v", i, appends, sub.Err())
				}
				if e.Position != uint64(i)+1 || e.ID != fmt.Sprintf("e%d", i) {
					t.Fatalf("subscription event #%d = %s at %d, want e%d at %d", i, e.ID, e.Position, i, i+1)
				}
			}
			if all, err := s.ReadAll(t.Context(), 0, 100); err != nil || len(all) != appends {
				t.Errorf("ReadAll() = %d events, %v; want %d (nothing of the refused appends)", len(all), err, appends)
			}
		})
	}
}

// TestBusyWriterGroupsAppends holds the writer while appenders arrive: none
// commits inline, and the writer commits all of them in one transaction
// (one clock reading, so one RecordedAt), each with its own places.
func TestBusyWriterGroupsAppends(t *testing.T) {
	var ticks atomic.Int64
	clock := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Second) }
	s := openTemp(t, WithClock(clock))

	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.onWriter(t.Context(), "hold the writer", func(*writer) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started

	const appenders = 16
	results := make([]events.AppendResult, appenders)
	errs := make([]error, appenders)
	var wg sync.WaitGroup
	for g := range appenders {
		// Half append to a stream of their own, half to one shared stream.
		stream := fmt.Sprintf("own-%d", g)
		if g%2 == 1 {
			stream = "shared"
		}
		wg.Go(func() {
			results[g], errs[g] = s.Append(t.Context(), stream, events.AnyVersion(), touch(fmt.Sprintf("e%d", g)))
		})
	}
	for len(s.w.reqs) < appenders {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	if got := inlinedAppends(s.w); got != 0 {
		t.Errorf("appends committed inline = %d, want 0 (the writer was busy)", got)
	}
	sharedVersions := map[uint64]bool{}
	for g := range appenders {
		if errs[g] != nil {
			t.Fatalf("Append #%d error = %v", g, errs[g])
		}
		if g%2 == 1 {
			sharedVersions[results[g].Versions[0]] = true
		} else if results[g].Versions[0] != 1 {
			t.Errorf("Append #%d to its own stream = version %d, want 1", g, results[g].Versions[0])
		}
	}
	if len(sharedVersions) != appenders/2 {
		t.Errorf("shared stream versions = %v, want %d distinct", sharedVersions, appenders/2)
	}
	all, err := s.ReadAll(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != appenders {
		t.Fatalf("ReadAll() = %d events, want %d", len(all), appenders)
	}
	for _, e := range all {
		var g int
		if _, err := fmt.Sscanf(e.ID, "e%d", &g); err != nil {
			t.Fatal(err)
		}
		if res := results[g]; e.Position != res.Positions[0] || e.Version != res.Versions[0] {
			t.Errorf("stored %s at version %d, position %d; answered %d, %d", e.ID, e.Version, e.Position, res.Versions[0], res.Positions[0])
		}
		if !e.RecordedAt.Equal(all[0].RecordedAt) {
			t.Errorf("%s recorded at %v, %s at %v: want one commit", e.ID, e.RecordedAt, all[0].ID, all[0].RecordedAt)
		}
	}
}

// TestConcurrentAppendersKeepVersions mixes appenders that commit inline and
// queued: some append to streams of their own with exact expected versions,
// others race on one shared stream, retrying on the version they were told.
// Every acknowledged append is stored at the places it was answered with,
// and the shared stream's versions are contiguous.
func TestConcurrentAppendersKeepVersions(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithSoleWriter()}} {
		t.Run(fmt.Sprintf("%d options", len(opts)), func(t *testing.T) {
			s := openTemp(t, opts...)
			const (
				owners  = 4
				racers  = 4
				appends = 25
			)
			var (
				mu    sync.Mutex
				acked = map[string]events.AppendResult{}
				wg    sync.WaitGroup
			)
			ack := func(id string, res events.AppendResult) {
				mu.Lock()
				defer mu.Unlock()
				acked[id] = res
			}
			for g := range owners {
				wg.Go(func() {
					stream := fmt.Sprintf("own-%d", g)
					for i := range appends {
						id := fmt.Sprintf("%s-%d", stream, i)
						res, err := s.Append(t.Context(), stream, events.ExactVersion(uint64(i)), touch(id))
						if err != nil || res.Versions[0] != uint64(i)+1 {
							t.Errorf("Append(%s) = %+v, %v; want version %d", id, res, err, i+1)
							return
						}
						ack(id, res)
					}
				})
			}
			for g := range racers {
				wg.Go(func() {
					var known uint64
					for i := range appends {
						id := fmt.Sprintf("racer-%d-%d", g, i)
						for {
							res, err := s.Append(t.Context(), "shared", events.ExactVersion(known), touch(id))
							var wrong *events.WrongVersionError
							if errors.As(err, &wrong) {
								known = wrong.Actual
								continue
							}
							if err != nil || res.Duplicate {
								t.Errorf("Append(%s) = %+v, %v", id, res, err)
								return
							}
							known = res.Versions[0]
							ack(id, res)
							break
						}
					}
				})
			}
			wg.Wait()

			all, err := s.ReadAll(t.Context(), 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(acked) || len(all) != (owners+racers)*appends {
				t.Fatalf("ReadAll() = %d events, acknowledged %d, want %d", len(all), len(acked), (owners+racers)*appends)
			}
			var sharedVersion uint64
			for i, e := range all {
				res, ok := acked[e.ID]
				if !ok || e.Position != res.Positions[0] || e.Version != res.Versions[0] {
					t.Errorf("stored %s at version %d, position %d; answered %+v", e.ID, e.Version, e.Position, res)
				}
				if e.Position != uint64(i)+1 {
					t.Errorf("event #%d at position %d, want contiguous positions", i, e.Position)
				}
				if e.Stream == "shared" {
					if sharedVersion++; e.Version != sharedVersion {
						t.Errorf("shared stream: %s at version %d, want %d", e.ID, e.Version, sharedVersion)
					}
				}
			}
		})
	}
}

// TestCloseWhileAppendingAlone closes the store under a lone appender,
// whose appends commit inline: each append is either answered and stored
// at its places, or refused with ErrClosed and not stored, and once Close
// has returned every append is refused.
func TestCloseWhileAppendingAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	running := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			id := fmt.Sprintf("e%d", i)
			res, err := s.Append(context.Background(), "lane", events.AnyVersion(), touch(id))
			if err != nil {
				stopped <- err
				return
			}
			acked[id] = res.Positions[0]
			if i == 10 {
				close(running)
			}
		}
	}()
	<-running
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; !errors.Is(err, ErrClosed) {
		t.Fatalf("Append during Close error = %v, want ErrClosed", err)
	}
	if _, err := s.Append(t.Context(), "lane", events.AnyVersion(), touch("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close error = %v, want ErrClosed", err)
	}

	s = openAt(t, path)
	all, err := s.ReadAll(t.Context(), 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(acked) {
		t.Errorf("stored %d events, acknowledged %d", len(all), len(acked))
	}
	for _, e := range all {
		if pos, ok := acked[e.ID]; !ok || pos != e.Position {
			t.Errorf("stored %s at %d; acknowledged %v at %d", e.ID, e.Position, ok, pos)
		}
	}
}

// panicWhileCommittingInline is the child of TestPanicWhileCommittingInline:
// its clock panics inside a commit made inline, and it recovers the panic
// the way the HTTP server recovers its handlers'. It must not get there.
func panicWhileCommittingInline(path string) error {
	var armed atomic.Bool
	clock := func() time.Time {
		if armed.Load() {
			panic("clock failed")
		}
		return t0
	}
	s, err := Open(path, WithClock(clock))
	if err != nil {
		return err
	}
	waitIdle(s.w)
	armed.Store(true)
	func() {
		defer func() { _ = recover() }()
		_, _ = s.Append(context.Background(), "lane", events.AnyVersion(), touch("e1"))
	}()
	return errors.New("the panic of an inline commit was recovered by the appender")
}

// TestPanicWhileCommittingInline: a panic while an appender holds the
// writer ends the process, as one on the writer's goroutine does, rather
// than reaching a caller that would recover it and leave the connection in
// the middle of a transaction.
func TestPanicWhileCommittingInline(t *testing.T) {
	c := startChild(t, "panic-inline", filepath.Join(t.TempDir(), "events.db"), "")
	if _, err := c.rest(); err != nil {
		t.Fatal(err)
	}
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("child exit = %v, want the exit status 2 of a panic; stderr:\n%s", err, c.stderr)
	}
	for _, want := range []string{"clock failed [while committing inline]", "commitInline"} {
		if !strings.Contains(c.stderr.String(), want) {
			t.Errorf("child stderr does not name %q:\n%s", want, c.stderr)
		}
	}
}
