package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/events"
)

// TestPausedNodeFencedOnKurrentDBEmulator: a node SIGSTOPped with an open
// turn is adopted by another node one lease later (manual clocks), then
// resumed (SIGCONT): its client's completion of that turn and the rest of
// the agent's reply (messages naming the turn) are refused with 409
// turn_not_open and append nothing; its turn start over the adopter's new
// turn is refused with 409 busy.
func TestPausedNodeFencedOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two hermes serve processes")
	}
	runPausedNodeFenced(t, emulatorStore(t))
}

// TestPausedNodeFencedOnPostgres is TestPausedNodeFencedOnKurrentDBEmulator
// on a real PostgreSQL.
func TestPausedNodeFencedOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two hermes serve processes")
	}
	runPausedNodeFenced(t, postgresStore(t))
}

// pause SIGSTOPs s; the returned func (also run at cleanup) SIGCONTs it.
func pause(t *testing.T, s *server) func() {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

func runPausedNodeFenced(t *testing.T, st sharedStore) {
	const ttl = 3 * time.Second
	names := []string{"adopter", "paused"}
	servers := make([]*server, len(names))
	for i, name := range names {
		servers[i] = startServer(t, filepath.Join(t.TempDir(), name), []string{"HERMES_STORE_URL=" + st.url, "HERMES_NODE_ID=" + name,
			"HERMES_NODE_LEASE_SECONDS=3", "HERMES_RECOVERY_RECENT_SECONDS=0"}, "--clock=manual")
	}
	store := st.open(t)
	base := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	setClock := func(i int, to time.Time) {
		t.Helper()
		servers[i].must("POST", "/v1/clock", map[string]any{"now": to.Format(time.RFC3339Nano)}, nil)
		waitFor(t, func() bool { return renewedAt(t, store, names[i], to) }, names[i]+"'s lease renewal at "+to.String())
	}
	for i := range servers {
		setClock(i, base)
	}
	adopter, paused := servers[0], servers[1]

	chat := "paused-turn"
	key := "agent:main:telegram:dm:" + chat
	lanePath := "/v1/sessions/" + url.PathEscape(key)
	var r resolved
	paused.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}, &r)
	sid := r.Entry.SessionID
	const turn = "t-paused"
	paused.must("POST", lanePath+"/turns/start", map[string]any{"turn_id": turn}, nil)
	messages := "/v1/transcripts/" + url.PathEscape(sid) + "/messages"
	paused.must("POST", messages, map[string]any{"role": "assistant", "content": "part 1", "turn_id": turn}, nil)

	resume := pause(t, paused)
	for step := 1; step <= 4; step++ {
		setClock(0, base.Add(time.Duration(step)*ttl/3))
	}
	var e entry
	waitFor(t, func() bool {
		return adopter.call("GET", lanePath, nil, &e) == http.StatusOK && e.OpenTurnID == nil
	}, "the paused node's turn to be adopted")
	adopter.must("POST", lanePath+"/turns/start", map[string]any{"turn_id": "t-adopter"}, nil)
	head, err := store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	resume()

	// The paused node's client carries on where it stopped.
	for _, w := range []struct {
		name, path string
		body       map[string]any
		code       string
	}{
		{"the rest of the reply", messages, map[string]any{"role": "assistant", "content": "part 2", "turn_id": turn}, "turn_not_open"},
		{"the completion", lanePath + "/turns", map[string]any{"turn_id": turn, "output_tokens": 9}, "turn_not_open"},
		{"a new turn over the adopter's", lanePath + "/turns/start", map[string]any{"turn_id": "t-paused-2"}, "busy"},
	} {
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		status, err := paused.request("POST", w.path, w.body, &body)
		if err != nil || status != http.StatusConflict || body.Error.Code != w.code {
			t.Errorf("%s on the resumed node = %d %+v (%v), want 409 %s", w.name, status, body.Error, err, w.code)
		}
	}
	if after, err := store.Head(t.Context()); err != nil || after != head {
		// Lease renewals of the paused node would move it too, but its
		// manual clock did not move: nothing of it runs a round.
		t.Errorf("log head after the refused writes = %d (%v), want %d: nothing appended", after, err, head)
	}
	count := func(stream string) map[string]int {
		envs, err := store.ReadStream(t.Context(), stream, 1, 10000, events.Forwards)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, env := range envs {
			n[env.Type]++
		}
		return n
	}
	laneTypes, transcriptTypes := count(events.LaneStream(key)), count(events.TranscriptStream(sid))
	if laneTypes[events.TypeTurnCompleted] != 0 || laneTypes[events.TypeTurnInterrupted] != 1 {
		t.Errorf("lane events %v, want one turn_interrupted (the adoption) and no turn_completed", laneTypes)
	}
	if transcriptTypes[events.TypeMessageAppended] != 1 || transcriptTypes[events.TypeTurnFenced] != 1 {
		t.Errorf("transcript events %v, want the one message written before the pause and one turn_fenced", transcriptTypes)
	}
	t.Logf("resumed node refused; lane %v, transcript %v", laneTypes, transcriptTypes)
}

// TestPausedLeaderDeliversNothingOnKurrentDBEmulator: the leader is
// SIGSTOPped past its lease; the other node takes the leader lease and
// delivers the webhooks of what was written meanwhile. Resumed, the old
// leader delivers nothing (each request checks the lease by its own clock
// first), until its next round stops its duties. The nodes run the system
// clock: a pause is time passing for the paused process too.
func TestPausedLeaderDeliversNothingOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two hermes serve processes")
	}
	runPausedLeader(t, emulatorStore(t))
}

// TestPausedLeaderDeliversNothingOnPostgres is
// TestPausedLeaderDeliversNothingOnKurrentDBEmulator on PostgreSQL.
func TestPausedLeaderDeliversNothingOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two hermes serve processes")
	}
	runPausedLeader(t, postgresStore(t))
}

func runPausedLeader(t *testing.T, st sharedStore) {
	hook := newHookCounter(t)
	env := func(name string) []string {
		return []string{"HERMES_STORE_URL=" + st.url, "HERMES_NODE_ID=" + name, "HERMES_NODE_LEASE_SECONDS=3", "HERMES_RECOVERY_RECENT_SECONDS=0"}
	}
	home := func(name string) string {
		h := filepath.Join(t.TempDir(), name)
		writeHookConfig(t, h, hook.url)
		return h
	}
	leader := startServer(t, home("leader"), env("leader"))
	store := st.open(t)
	waitFor(t, func() bool { return leaseHolder(t, store) == "leader" }, "the first node to lead")
	other := startServer(t, home("other"), env("other"))
	resolveChats := func(s *server, prefix string, n int) {
		for i := range n {
			s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("%s-%d", prefix, i), "chat_type": "dm"}}, nil)
		}
	}
	resolveChats(other, "before", 10)
	waitForDelivery(t, store, hook)

	resume := pause(t, leader)
	resolveChats(other, "paused", 20)
	waitFor(t, func() bool { return leaseHolder(t, store) == "other" }, "the other node to take the leader lease")
	waitForDelivery(t, store, hook)
	before := hook.counts()
	resume()
	waitFor(t, func() bool { return strings.Contains(leader.stderr.String(), "no longer leader") }, "the resumed node to stop its duties")
	after := hook.counts()
	if !maps.Equal(before, after) {
		extra := 0
		for id, n := range after {
			extra += n - before[id]
		}
		t.Errorf("the resumed old leader delivered %d webhooks after waking, want none (the new leader delivered them)", extra)
	}
	dups := 0
	for _, n := range after {
		if n > 1 {
			dups++
		}
	}
	t.Logf("%d events delivered, %d of them twice (the takeover window: delivered by the old leader after its last recorded checkpoint)", len(after), dups)
	for _, s := range []*server{leader, other} {
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit %d:\n%s", code, s.stderr.String())
		}
	}
}

// leaseHolder is the holder of the leader lease as the log says ("" when
// free or never taken).
func leaseHolder(t *testing.T, store events.Store) string {
	t.Helper()
	envs, err := store.ReadStream(t.Context(), events.LeaderLease, 0, 1, events.Backwards)
	if err != nil || len(envs) == 0 {
		return ""
	}
	switch e := envs[0].Event.(type) {
	case events.LeaseAcquired:
		return e.Holder
	case events.LeaseRenewed:
		return e.Holder
	}
	return ""
}
