package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/domain"
	"hermes/events"
	"hermes/node"
)

// ack is a request hermes acknowledged before it was killed.
type ack struct {
	key      string
	turnID   string // a turn start or completion
	complete bool
	version  uint64 // lane version the answer reported (lane commands)
	position uint64 // position of an appended message
}

// TestCrashRecovery drives concurrent lanes over HTTP, SIGKILLs hermes serve
// at random moments (20 cycles), and checks after each kill that every
// acknowledged request is in the log and the read models match a rebuild,
// and after each restart that interrupted turns were marked to resume on
// the same session and that a lane stuck across 3 crashes was suspended.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	home := t.TempDir()
	const workers = 4
	const cycles = 20
	stuckSource := map[string]any{"platform": "discord", "chat_id": "stuck", "chat_type": "dm"}
	stuckKey := "agent:main:discord:dm:stuck"
	stuckCount := 0
	var acked []ack

	for cycle := range cycles {
		s := startServer(t, home, []string{"HERMES_RECOVERY_RECENT_SECONDS=0"})
		if cycle > 0 {
			checkRecovery(t, s, home)
			stuckCount++
			var e entry
			s.must("GET", "/v1/sessions/"+url.PathEscape(stuckKey), nil, &e)
			if stuckCount >= 3 {
				if !e.Suspended {
					t.Fatalf("cycle %d: lane with a turn open in %d consecutive crashes is not suspended: %+v", cycle, stuckCount, e)
				}
				var r resolved
				s.must("POST", "/v1/sessions/resolve", map[string]any{"source": stuckSource}, &r)
				if r.ResetReason == nil || *r.ResetReason != "suspended" {
					t.Fatalf("cycle %d: resolve of the stuck lane = %+v, want reset_reason suspended", cycle, r)
				}
				stuckCount = 0
			} else if e.Suspended {
				t.Fatalf("cycle %d: stuck lane suspended after only %d crashes", cycle, stuckCount)
			}
		}
		// The stuck lane starts a turn that never completes.
		var r resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": stuckSource}, &r)
		s.must("POST", "/v1/sessions/"+url.PathEscape(stuckKey)+"/turns/start", map[string]any{"turn_id": fmt.Sprintf("stuck-%d", cycle)}, nil)

		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := drive(s, cycle, w)
				mu.Lock()
				acked = append(acked, got...)
				mu.Unlock()
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		s.kill()
		wg.Wait()

		checkAcknowledged(t, home, acked)
		hermes(t, 0, "projections", "verify", "--home", home)
	}
}

// drive runs turns on worker w's lane until the server goes away, and
// returns what was acknowledged.
func drive(s *server, cycle, w int) []ack {
	var out []ack
	source := map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("w%d", w), "chat_type": "dm"}
	key := fmt.Sprintf("agent:main:telegram:dm:w%d", w)
	path := "/v1/sessions/" + url.PathEscape(key)
	for i := 0; ; i++ {
		var r resolved
		if s.try("POST", "/v1/sessions/resolve", map[string]any{"source": source}, &r) != nil {
			return out
		}
		out = append(out, ack{key: key, version: r.Entry.Version})
		turn := fmt.Sprintf("c%d-w%d-%d", cycle, w, i)
		var started struct {
			Entry entry `json:"entry"`
		}
		if s.try("POST", path+"/turns/start", map[string]any{"turn_id": turn}, &started) != nil {
			return out
		}
		out = append(out, ack{key: key, turnID: turn, version: started.Entry.Version})
		for _, role := range []string{"user", "assistant"} {
			var m struct {
				Position uint64 `json:"position"`
			}
			if s.try("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": role, "content": turn + " " + role}, &m) != nil {
				return out
			}
			out = append(out, ack{key: key, position: m.Position})
		}
		var done entry
		if s.try("POST", path+"/turns", map[string]any{"turn_id": turn, "input_tokens": 3, "output_tokens": 2}, &done) != nil {
			return out
		}
		out = append(out, ack{key: key, turnID: turn, complete: true, version: done.Version})
	}
}

// try is call for the load workers: an error (not a test failure) when the
// request was not acknowledged with 200.
func (s *server) try(method, path string, body, out any) error {
	status, err := s.request(method, path, body, out)
	if err != nil {
		return err
	}
	if status != 200 {
		return fmt.Errorf("%s %s: status %d", method, path, status)
	}
	return nil
}

func readLog(t *testing.T, home string) []events.Envelope {
	t.Helper()
	store, err := sqlite.Open(node.Home{Dir: home}.EventsDB(), sqlite.WithReadOnly())
	if err != nil {
		t.Fatalf("the store does not open cleanly after a kill: %v", err)
	}
	defer store.Close()
	all, err := store.ReadAll(context.Background(), 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func checkAcknowledged(t *testing.T, home string, acked []ack) {
	t.Helper()
	all := readLog(t, home)
	versions := map[string]uint64{}
	started, completed := map[string]bool{}, map[string]bool{}
	positions := map[uint64]bool{}
	for i, env := range all {
		if env.Position != uint64(i+1) {
			t.Fatalf("positions are not contiguous: event %d has position %d", i, env.Position)
		}
		positions[env.Position] = true
		if key, ok := events.SessionKeyOf(env.Stream); ok {
			if env.Version != versions[key]+1 {
				t.Fatalf("lane %s versions skip: %d after %d", key, env.Version, versions[key])
			}
			versions[key] = env.Version
		}
		switch e := env.Event.(type) {
		case events.TurnStarted:
			started[e.TurnID] = true
		case events.TurnCompleted:
			completed[e.TurnID] = true
		}
	}
	for _, a := range acked {
		switch {
		case a.position != 0 && !positions[a.position]:
			t.Fatalf("acknowledged message at position %d is missing", a.position)
		case a.turnID != "" && a.complete && !completed[a.turnID]:
			t.Fatalf("acknowledged completion of turn %s is missing", a.turnID)
		case a.turnID != "" && !a.complete && !started[a.turnID]:
			t.Fatalf("acknowledged start of turn %s is missing", a.turnID)
		case a.version > versions[a.key]:
			t.Fatalf("lane %s acknowledged version %d but the log ends at %d", a.key, a.version, versions[a.key])
		}
	}
}

// checkRecovery: the lanes whose turn was open when the previous run died
// are exactly those the restart recorded as interrupted, and each (unless
// suspended as a stuck loop) is resume-pending / restart_interrupted on the
// same session.
func checkRecovery(t *testing.T, s *server, home string) {
	t.Helper()
	all := readLog(t, home)
	var interrupted *events.RunInterrupted
	at := 0
	for i, env := range all {
		if e, ok := env.Event.(events.RunInterrupted); ok {
			interrupted, at = &e, i
		}
	}
	if interrupted == nil {
		t.Fatal("restart after a kill recorded no interrupted run")
	}
	lanes := map[string]domain.Lane{}
	for _, env := range all[:at] {
		if key, ok := events.SessionKeyOf(env.Stream); ok {
			lanes[key] = domain.Evolve(lanes[key], env.Event)
		}
	}
	var open []string
	for key, l := range lanes {
		if l.Exists() && l.TurnOpen() {
			open = append(open, key)
		}
	}
	slices.Sort(open)
	got := slices.Clone(interrupted.OpenLanes)
	slices.Sort(got)
	if !slices.Equal(open, got) {
		t.Fatalf("open turns at the crash %v, recorded as interrupted %v", open, got)
	}
	for _, key := range open {
		var e entry
		s.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
		if e.Suspended {
			continue
		}
		if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "restart_interrupted" || e.SessionID != lanes[key].SessionID || e.OpenTurnID != nil {
			t.Fatalf("lane %s after the restart = %+v, want resume_pending restart_interrupted on session %s with the turn closed", key, e, lanes[key].SessionID)
		}
	}
}
