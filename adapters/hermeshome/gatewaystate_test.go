package hermeshome

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/events"
)

func lane(key, sid string) events.LaneImported {
	return events.LaneImported{SessionKey: key, SessionID: sid}
}

func strp(s string) *string { return &s }

func session(id, parent, endReason string) Session {
	e := events.SessionImported{SessionID: id}
	if parent != "" {
		e.ParentSessionID = strp(parent)
	}
	if endReason != "" {
		e.EndReason = strp(endReason)
	}
	return Session{Event: e}
}

func TestMarkInterruptedTurns(t *testing.T) {
	started := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC)
	lease := TurnLease{ConversationID: "root", Holder: "gw:1", AcquiredAt: float64(started.Unix())}
	suspended := lane("k", "root")
	suspended.Suspended = true
	pending := lane("k", "root")
	pending.ResumePending, pending.ResumeReason = true, "restart_timeout"
	tests := []struct {
		name       string
		given      events.LaneImported
		turns      map[string]time.Time
		leases     []TurnLease
		sessions   []Session
		clean      bool
		wantReason string // "" for not resume-pending
		wantMarked int
	}{
		{name: "an active-turn marker resumes the lane", given: lane("k", "s1"), turns: map[string]time.Time{"k": started},
			wantReason: "restart_interrupted", wantMarked: 1},
		{name: "a lease on the lane's session resumes it", given: lane("k", "root"), leases: []TurnLease{lease},
			wantReason: "restart_interrupted", wantMarked: 1},
		{name: "a lease on the compression root resumes its continuation", given: lane("k", "child"), leases: []TurnLease{lease},
			sessions:   []Session{session("root", "", "compression"), session("child", "root", "")},
			wantReason: "restart_interrupted", wantMarked: 1},
		{name: "a parent that ended otherwise is another conversation", given: lane("k", "child"), leases: []TurnLease{lease},
			sessions: []Session{session("root", "", "new_session"), session("child", "root", "")}},
		{name: "a clean shutdown discards the markers", given: lane("k", "root"), leases: []TurnLease{lease},
			turns: map[string]time.Time{"k": started}, clean: true},
		{name: "a suspended lane is not re-armed", given: suspended, leases: []TurnLease{lease}},
		{name: "a resume-pending lane keeps its reason", given: pending, leases: []TurnLease{lease}, wantReason: "restart_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lanes := []events.LaneImported{tt.given}
			var rep Report
			marked := MarkInterruptedTurns(lanes, tt.turns, tt.leases, tt.sessions, tt.clean, &rep)
			got := lanes[0]
			if marked != tt.wantMarked {
				t.Errorf("marked = %d, want %d", marked, tt.wantMarked)
			}
			if got.ResumePending != (tt.wantReason != "") || got.ResumeReason != tt.wantReason && tt.wantReason != "" {
				t.Errorf("lane = pending %v reason %q, want %q", got.ResumePending, got.ResumeReason, tt.wantReason)
			}
			if tt.wantMarked > 0 && (got.LastResumeMarkedAt == nil || !got.LastResumeMarkedAt.Equal(started)) {
				t.Errorf("last_resume_marked_at = %v, want the turn's start %v", got.LastResumeMarkedAt, started)
			}
		})
	}
}

func TestMergeRoutingDBWins(t *testing.T) {
	db := Routing{Lanes: []events.LaneImported{lane("b", "db-b")}}
	file := Routing{Lanes: []events.LaneImported{lane("a", "file-a"), lane("b", "file-b")}}
	var rep Report
	got := MergeRouting(db, file, &rep)
	if len(got.Lanes) != 2 || got.Lanes[0].SessionID != "file-a" || got.Lanes[1].SessionID != "db-b" {
		t.Fatalf("MergeRouting = %+v, want a from the file and b from the table", got.Lanes)
	}
	if !strings.Contains(rep.Notes()[0].What, "1 entries also in state.db's gateway_routing") {
		t.Errorf("notes = %v", rep.Notes())
	}
}

// stateDB writes a state.db with a gateway_routing table of the given
// shape and rows.
func stateDB(t *testing.T, ddl string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := `CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (25);
		CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL);
		CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, timestamp REAL);`
	if _, err := db.Exec(base + ddl); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGatewayRoutingScopes(t *testing.T) {
	entry := func(sid string) string {
		return `'{"session_key": "k", "session_id": "` + sid + `", "created_at": "2026-08-08T10:00:00", "updated_at": "2026-08-08T10:00:00"}'`
	}
	dir := t.TempDir()
	sessionsDir := filepath.Join(dir, "sessions")
	if err := os.Mkdir(sessionsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	table := `CREATE TABLE gateway_routing (scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL, entry_json TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key));`
	tests := []struct {
		name     string
		rows     string
		wantSID  string // "" for no rows read
		wantNote string
	}{
		{name: "this home's scope wins over another profile's",
			rows:    `INSERT INTO gateway_routing VALUES ('` + sessionsDir + `', 'k', ` + entry("20260808_100000_aaaaaaaa") + `, 1), ('/elsewhere/sessions', 'k', ` + entry("20260808_100000_bbbbbbbb") + `, 1);`,
			wantSID: "20260808_100000_aaaaaaaa", wantNote: "another profile"},
		{name: "a moved home's only scope is read",
			rows:    `INSERT INTO gateway_routing VALUES ('/old/place/sessions', 'k', ` + entry("20260808_100000_bbbbbbbb") + `, 1);`,
			wantSID: "20260808_100000_bbbbbbbb", wantNote: "the home was moved"},
		{name: "two foreign scopes: neither is read",
			rows:     `INSERT INTO gateway_routing VALUES ('/a/sessions', 'k', ` + entry("20260808_100000_aaaaaaaa") + `, 1), ('/b/sessions', 'k', ` + entry("20260808_100000_bbbbbbbb") + `, 1);`,
			wantNote: "another profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := stateDB(t, table+tt.rows)
			var rep Report
			db, err := OpenStateDB(context.Background(), path, &rep)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.GatewayRouting(context.Background(), sessionsDir, &rep)
			if err != nil {
				t.Fatal(err)
			}
			r := ReadRoutingRows(rows, time.UTC, &rep)
			got := ""
			if len(r.Lanes) == 1 {
				got = r.Lanes[0].SessionID
			}
			if got != tt.wantSID || len(r.Lanes) > 1 {
				t.Errorf("lanes = %+v, want session %q", r.Lanes, tt.wantSID)
			}
			var all bytes.Buffer
			for _, n := range rep.Notes() {
				all.WriteString(n.String() + "\n")
			}
			if !strings.Contains(all.String(), tt.wantNote) {
				t.Errorf("notes lack %q:\n%s", tt.wantNote, all.String())
			}
		})
	}
}

func TestGatewayRoutingLegacyShapes(t *testing.T) {
	// The first routing builds had no scope column; a table that is not
	// Hermes' index is left alone.
	legacy := stateDB(t, `CREATE TABLE gateway_routing (session_key TEXT PRIMARY KEY, entry_json TEXT NOT NULL, updated_at REAL NOT NULL);
		INSERT INTO gateway_routing VALUES ('k', '{"session_id": "20260808_100000_aaaaaaaa", "created_at": "2026-08-08T10:00:00"}', 1);`)
	other := stateDB(t, `CREATE TABLE gateway_routing (session_key TEXT PRIMARY KEY, session_id TEXT);`)
	for path, want := range map[string]int{legacy: 1, other: 0} {
		var rep Report
		db, err := OpenStateDB(context.Background(), path, &rep)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.GatewayRouting(context.Background(), t.TempDir(), &rep)
		db.Close()
		if err != nil || len(rows) != want {
			t.Errorf("GatewayRouting = %d rows, %v; want %d", len(rows), err, want)
		}
	}
}

func TestReadResetPolicy(t *testing.T) {
	tests := []struct {
		name   string
		yaml   string // "" for no file
		schema int
		want   string
	}{
		{name: "no file, spec era", schema: 11, want: "both (daily at 04:00, idle after 1440 minutes)"},
		{name: "no file, July 2026 on", schema: 25, want: "none"},
		{name: "top level", yaml: "session_reset:\n  mode: idle\n  idle_minutes: 90\n", schema: 26, want: "idle after 90 minutes"},
		{name: "nested under gateway", yaml: "gateway:\n  session_reset:\n    mode: daily\n    at_hour: 6\n", schema: 26, want: "daily at 06:00"},
		{name: "top level wins", yaml: "session_reset:\n  mode: none\ngateway:\n  session_reset:\n    mode: daily\n", schema: 11, want: "none"},
		{name: "not YAML", yaml: "session_reset: [\n", schema: 26, want: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Home{Dir: t.TempDir()}
			if tt.yaml != "" {
				if err := os.WriteFile(h.ConfigYAML(), []byte(tt.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var rep Report
			if got := h.ReadResetPolicy(tt.schema, &rep).String(); got != tt.want {
				t.Errorf("ReadResetPolicy = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadJSONLSkipsWhatIsNoSession(t *testing.T) {
	data := strings.Join([]string{
		`{"id": "20260808_100000_cccccccc", "source": "cli", "started_at": 10, "parent_session_id": "20260808_100000_pppppppp", "messages": [{"id": 2, "role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 11, "observed": 1}]}`,
		`not json`,
		`{"source": "cli"}`,
		`{"id": "../x", "started_at": 1}`,
		`{"id": "20260808_100000_pppppppp", "source": "cli", "started_at": NaN, "messages": [{"id": 1, "content": "no role"}]}`,
		``,
	}, "\n")
	var rep Report
	var got []JSONLSession
	err := ReadJSONL(strings.NewReader(data), int64(len(data)), &rep, func(s JSONLSession) error {
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Session.SessionID != "20260808_100000_pppppppp" || got[1].Session.SessionID != "20260808_100000_cccccccc" {
		t.Fatalf("sessions = %+v, want the parent first, then its child", got)
	}
	m := got[1].Messages
	if len(m) != 1 || *m[0].Content != contentJSONPrefix+`[{"type":"text","text":"hi"}]` || string(m[0].Extra["observed"]) != "1" {
		t.Errorf("child's messages = %+v", m)
	}
	if len(got[0].Messages) != 0 {
		t.Errorf("a message without a role was imported: %+v", got[0].Messages)
	}
	var all bytes.Buffer
	for _, n := range rep.Notes() {
		all.WriteString(n.String() + "\n")
	}
	for _, want := range []string{"jsonl line 2: not a JSON object", "jsonl line 3: no session id", "contains a path separator", "started_at is not a finite number", "no role"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("notes lack %q:\n%s", want, all.String())
		}
	}
}
