package projections_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/testfixtures"
)

func openLanes(dir string) ([]projections.Projection, error) {
	p, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{})
	if err != nil {
		return nil, err
	}
	return []projections.Projection{p}, nil
}

func TestRebuildAndVerify(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := testfixtures.NewClock(testfixtures.Date(2026, 5, 9, 10, 0, 0, 0))
	h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithClock(clock.Now))
	for i := range 20 {
		clock.Advance(time.Minute)
		src := domain.SessionSource{Platform: "discord", ChatID: fmt.Sprint(i % 7), ChatType: "group", UserID: "u"}
		r, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.CompleteTurn(ctx, commands.CompleteTurn{Key: r.Lane.SessionKey, Outcome: domain.TurnOutcome{InputTokens: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}

	liveDir := filepath.Join(dir, "live")
	if err := projections.Rebuild(ctx, store, openLanes, liveDir, nil); err != nil {
		t.Fatal(err)
	}
	if err := projections.Rebuild(ctx, store, openLanes, liveDir, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Rebuild into a non-empty directory = %v, want a refusal", err)
	}
	live, err := openLanes(liveDir)
	if err != nil {
		t.Fatal(err)
	}
	defer live[0].Close()

	diff, err := projections.Verify(ctx, store, openLanes, live, filepath.Join(dir, "scratch1"), nil)
	if err != nil || diff != nil {
		t.Fatalf("Verify of a faithful read model = %v, %v; want no difference", diff, err)
	}

	db, err := sql.Open("sqlite", filepath.Join(liveDir, "lanes.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE lanes SET total_tokens = 999 WHERE session_key = 'agent:main:discord:group:3:u'`); err != nil {
		t.Fatal(err)
	}
	diff, err = projections.Verify(ctx, store, openLanes, live, filepath.Join(dir, "scratch2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff == nil || diff.Projection != sessions.Name || !strings.Contains(diff.Live, "agent:main:discord:group:3:u") || !strings.Contains(diff.Live, "999") {
		t.Fatalf("Verify of a tampered read model = %v, want the tampered lane reported", diff)
	}
}
