package node

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"hermes/adapters/config"
	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// damagedIndexHome is a home whose log of 3,000 events has a leaf page of
// its (stream, version) index damaged in the middle: the tail reads and
// decodes, and an INSERT would not notice.
func damagedIndexHome(t *testing.T) Home {
	t.Helper()
	h := homeWithLog(t, 3000)
	ondisk.DamageLeaf(t, h.EventsDB(), "sqlite_autoindex_events_1")
	return h
}

// rowsOf counts the log's events whose stream contains part, reading the
// table itself (not the damaged index).
func rowsOf(t *testing.T, h Home, part string) (n, head int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+h.EventsDB()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow("SELECT count(*) FROM events NOT INDEXED WHERE instr(stream, ?) > 0", part).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT max(position) FROM events").Scan(&head); err != nil {
		t.Fatal(err)
	}
	return n, head
}

func nodeConfig(t *testing.T, h Home, addr string) config.Config {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Home: h.Dir, Flags: map[string]string{"api.addr": addr}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDamagedLogRefusesTheStart: a log small enough to be checked whole
// before serving, damaged outside the tail Open reads, is refused before
// anything is appended to it, naming the way out.
func TestDamagedLogRefusesTheStart(t *testing.T) {
	h := damagedIndexHome(t)
	_, before := rowsOf(t, h, "")
	var logs syncBuffer
	n, err := Open(context.Background(), Config{Settings: nodeConfig(t, h, freeAddr(t)), Home: h, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		n.Close()
		t.Fatal("Open of a log with a damaged index page succeeded")
	}
	for _, want := range []string{"damaged", "hermes check", "hermes restore", "--salvage"} {
		if !errors.Is(err, events.ErrLogDamaged) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open = %v, want ErrLogDamaged saying %q", err, want)
		}
	}
	if _, after := rowsOf(t, h, ""); after != before {
		t.Fatalf("head moved %d -> %d: the refused start appended", before, after)
	}
}

// TestDamagedBigLogStopsWritesOnceFound: a log too big to check before
// serving is checked in the background; once the check finds the damage,
// /readyz says damaged and every write is refused with 503 naming hermes
// check, and none of them is in the log.
func TestDamagedBigLogStopsWritesOnceFound(t *testing.T) {
	h := damagedIndexHome(t)
	addr := freeAddr(t)
	var logs syncBuffer
	n, err := Open(context.Background(), Config{Settings: nodeConfig(t, h, addr), Home: h,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), startCheckMax: 1})
	if err != nil {
		t.Fatalf("Open = %v, want it to serve while the log is checked in the background", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer n.Close()
		_ = n.Run(ctx) // its stop cannot be recorded in a damaged log
	}()
	t.Cleanup(func() { cancel(); <-done })

	deadline := time.Now().Add(2 * time.Minute)
	for {
		var ready struct{ Status, Reason string }
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = json.Unmarshal(data, &ready)
		}
		if ready.Status == "damaged" {
			if !strings.Contains(ready.Reason, "hermes check") {
				t.Fatalf("/readyz damaged, reason %q does not name hermes check", ready.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said damaged:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 20 {
		body := fmt.Sprintf(`{"source":{"platform":"telegram","chat_id":"after-damage-%d"}}`, i)
		resp, err := http.Post("http://"+addr+"/v1/sessions/resolve", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), "hermes check") {
			t.Fatalf("resolve %d on a damaged log = %d %s, want 503 naming hermes check", i, resp.StatusCode, data)
		}
	}
	if !strings.Contains(logs.String(), "the event log is damaged") {
		t.Errorf("the node did not log the damage:\n%s", logs.String())
	}
	cancel()
	<-done
	if got, _ := rowsOf(t, h, "after-damage"); got != 0 {
		t.Fatalf("%d events of the refused resolves are in the log", got)
	}
}
