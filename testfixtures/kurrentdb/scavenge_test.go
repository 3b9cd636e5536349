package kurrentdb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"hermes/testfixtures/kurrentdb"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// operations dials the emulator for the operations service (the esdb
// client has no call for it).
func operations(t *testing.T, srv *kurrentdb.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// scavengeCompleted is the data of a $scavengeCompleted event.
type scavengeCompleted struct {
	ScavengeID string `json:"scavengeId"`
	Result     string `json:"result"`
	SpaceSaved int64  `json:"spaceSaved"`
}

// waitScavenge follows $scavenges-<id> until its $scavengeCompleted event.
func waitScavenge(t *testing.T, c *esdb.Client, id string) scavengeCompleted {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := c.SubscribeToStream(ctx, "$scavenges-"+id, esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var started bool
	for {
		e := sub.Recv()
		if e.SubscriptionDropped != nil {
			t.Fatalf("waiting for scavenge %s: %v", id, e.SubscriptionDropped.Error)
		}
		if e.EventAppeared == nil {
			continue
		}
		r := e.EventAppeared.OriginalEvent()
		switch r.EventType {
		case "$scavengeStarted":
			started = true
		case "$scavengeCompleted":
			if !started {
				t.Errorf("$scavengeCompleted came before $scavengeStarted")
			}
			var done scavengeCompleted
			if err := json.Unmarshal(r.Data, &done); err != nil || done.ScavengeID != id {
				t.Fatalf("$scavengeCompleted data %s: %v", r.Data, err)
			}
			return done
		}
	}
}

// scavenge runs a scavenge through the operations service and waits for it.
func scavenge(t *testing.T, srv *kurrentdb.Server, c *esdb.Client) scavengeCompleted {
	t.Helper()
	resp, err := kurrentdb.StartScavenge(t.Context(), operations(t, srv))
	if err != nil || resp.Result != kurrentdb.ScavengeStarted || resp.ID == "" {
		t.Fatalf("StartScavenge() = %+v, %v; want started with an id", resp, err)
	}
	return waitScavenge(t, c, resp.ID)
}

func TestScavengeRemovesWhatReadsNoLongerServe(t *testing.T) {
	clock := newManualClock()
	srv, c := client(t, kurrentdb.WithClock(clock.Now))
	ctx := t.Context()
	// given
	appendN(t, c, "tomb", esdb.NoStream{}, 3, "TOMB-MARK")
	setMetadata(t, c, "tomb", `{"owner":"TOMB-META-MARK"}`)
	appendN(t, c, "soft", esdb.NoStream{}, 2, "SOFT-MARK")
	appendN(t, c, "soft", esdb.Any{}, 1, "SOFT-LAST")
	appendN(t, c, "trunc", esdb.NoStream{}, 2, "TRUNC-MARK")
	appendN(t, c, "trunc", esdb.Any{}, 2, "TRUNC-KEPT")
	setMetadata(t, c, "trunc", `{"$tb":2}`)
	appendN(t, c, "count", esdb.NoStream{}, 3, "COUNT-MARK")
	appendN(t, c, "count", esdb.Any{}, 1, "COUNT-KEPT")
	setMetadata(t, c, "count", `{"$maxCount":1}`)
	appendN(t, c, "aged", esdb.NoStream{}, 2, "AGED-MARK")
	clock.Advance(2 * time.Hour)
	appendN(t, c, "aged", esdb.Any{}, 1, "AGED-KEPT")
	setMetadata(t, c, "aged", `{"$maxAge":3600}`)
	setMetadata(t, c, "meta", `{"owner":"META-OLD-MARK"}`)
	setMetadata(t, c, "meta", `{"owner":"META-NEW"}`)
	appendN(t, c, "plain", esdb.NoStream{}, 2, "PLAIN-KEPT")
	if _, err := c.TombstoneStream(ctx, "tomb", esdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteStream(ctx, "soft", esdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := []string{"TOMB-MARK", "TOMB-META-MARK", "SOFT-MARK", "TRUNC-MARK", "COUNT-MARK", "AGED-MARK", "META-OLD-MARK"}
	kept := []string{"SOFT-LAST", "TRUNC-KEPT", "COUNT-KEPT", "AGED-KEPT", "META-NEW", "PLAIN-KEPT"}
	// control: before the scavenge every marker is stored and in $all
	storage, log := srv.Storage(), readLog(t, c)
	for _, m := range append(append([]string{}, gone...), kept...) {
		if !bytes.Contains(storage, []byte(m)) || !containsMarker(log, m) {
			t.Fatalf("before the scavenge %s is not stored and in $all", m)
		}
	}

	// when
	done := scavenge(t, srv, c)

	// then
	if done.Result != "Success" || done.SpaceSaved <= 0 {
		t.Errorf("$scavengeCompleted = %+v, want Success with space saved", done)
	}
	storage, log = srv.Storage(), readLog(t, c)
	for _, m := range gone {
		if bytes.Contains(storage, []byte(m)) {
			t.Errorf("storage still holds %s after the scavenge", m)
		}
		if containsMarker(log, m) {
			t.Errorf("$all still returns %s after the scavenge", m)
		}
	}
	// A scavenge never removes a stream's last event (the soft-deleted
	// stream's included), nor what reads still serve.
	for _, m := range kept {
		if !bytes.Contains(storage, []byte(m)) {
			t.Errorf("storage lost %s, which the scavenge keeps", m)
		}
	}
	for _, tc := range []struct {
		stream string
		want   []uint64
		code   esdb.ErrorCode
	}{
		{"tomb", nil, esdb.ErrorCodeStreamDeleted},
		{"soft", nil, esdb.ErrorCodeResourceNotFound},
		{"trunc", []uint64{2, 3}, -1},
		{"count", []uint64{3}, -1},
		{"aged", []uint64{2}, -1},
		{"plain", []uint64{0, 1}, -1},
	} {
		got, err := readStream(t, c, tc.stream, esdb.ReadStreamOptions{})
		if tc.code >= 0 {
			if code(err) != tc.code {
				t.Errorf("read %s after the scavenge error = %v, want code %d", tc.stream, err, tc.code)
			}
			continue
		}
		if err != nil || !equalRevisions(revisions(got), tc.want) {
			t.Errorf("read %s after the scavenge = %v, %v; want %v", tc.stream, revisions(got), err, tc.want)
		}
	}
	// The soft-deleted stream keeps its last revision: recreating continues.
	appendN(t, c, "soft", esdb.NoStream{}, 1, "SOFT-AGAIN")
	if got, err := readStream(t, c, "soft", esdb.ReadStreamOptions{}); err != nil || !equalRevisions(revisions(got), []uint64{3}) {
		t.Errorf("recreated soft = %v, %v; want [3]", revisions(got), err)
	}
	// The tombstone stays, so the stream stays deleted.
	var tombstones int
	for _, e := range readLog(t, c) {
		if e.StreamID == "tomb" || e.StreamID == "$$tomb" {
			if e.EventType != "$streamDeleted" {
				t.Errorf("$all still holds %s/%d (%s)", e.StreamID, e.EventNumber, e.EventType)
			}
			tombstones++
		}
	}
	if tombstones != 1 {
		t.Errorf("$all holds %d records of tomb, want its tombstone only", tombstones)
	}
}

func TestScavengeLeavesLiveSubscriptionsInPlace(t *testing.T) {
	srv, c := client(t, kurrentdb.WithSystemEventEvery(0))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	appendN(t, c, "gone", esdb.NoStream{}, 3, "GONE")
	appendN(t, c, "kept", esdb.NoStream{}, 1, "KEPT-1")
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Start{},
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"kept"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got, err := collect(ctx, t, sub, func(_ []*esdb.RecordedEvent, caughtUp bool) bool { return caughtUp })
	if err != nil || len(got) != 1 {
		t.Fatalf("caught up with %d events, %v; want 1", len(got), err)
	}
	if _, err := c.TombstoneStream(t.Context(), "gone", esdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	scavenge(t, srv, c)
	appendN(t, c, "kept", esdb.Any{}, 1, "KEPT-2")
	got, err = collect(ctx, t, sub, func(got []*esdb.RecordedEvent, _ bool) bool { return len(got) == 1 })
	if err != nil || !bytes.Contains(got[0].Data, []byte("KEPT-2")) || got[0].EventNumber != 1 {
		t.Errorf("live after the scavenge = %+v, %v; want kept/1 once", got, err)
	}
}

func TestScavengeOperations(t *testing.T) {
	release := make(chan struct{})
	running := make(chan string, 1)
	srv, c := client(t, kurrentdb.WithScavengeHook(func(id string) {
		running <- id
		<-release
	}))
	conn := operations(t, srv)
	ctx := t.Context()
	appendN(t, c, "s", esdb.NoStream{}, 2, "STOPPED-KEEPS")
	if _, err := c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := kurrentdb.StartScavenge(ctx, conn)
	if err != nil || first.Result != kurrentdb.ScavengeStarted {
		t.Fatalf("StartScavenge() = %+v, %v", first, err)
	}
	if id := <-running; id != first.ID {
		t.Fatalf("running scavenge %s, want %s", id, first.ID)
	}
	again, err := kurrentdb.StartScavenge(ctx, conn)
	if err != nil || again != (kurrentdb.ScavengeResponse{ID: first.ID, Result: kurrentdb.ScavengeInProgress}) {
		t.Errorf("StartScavenge() while one runs = %+v, %v; want in progress with its id", again, err)
	}
	_, err = kurrentdb.StopScavenge(ctx, conn, "no-such-scavenge")
	if status.Code(err) != codes.NotFound {
		t.Errorf("StopScavenge(unknown) error = %v, want NotFound", err)
	}
	stopped, err := kurrentdb.StopScavenge(ctx, conn, first.ID)
	if err != nil || stopped.Result != kurrentdb.ScavengeStopped {
		t.Errorf("StopScavenge() = %+v, %v; want stopped", stopped, err)
	}
	close(release)
	if done := waitScavenge(t, c, first.ID); done.Result != "Stopped" {
		t.Errorf("$scavengeCompleted result = %q, want Stopped", done.Result)
	}
	if !bytes.Contains(srv.Storage(), []byte("STOPPED-KEEPS")) {
		t.Error("a stopped scavenge removed events")
	}
	// The next one runs to the end.
	next, err := kurrentdb.StartScavenge(ctx, conn)
	if err != nil || next.Result != kurrentdb.ScavengeStarted || next.ID == first.ID {
		t.Fatalf("StartScavenge() after the stop = %+v, %v", next, err)
	}
	<-running
	if done := waitScavenge(t, c, next.ID); done.Result != "Success" {
		t.Errorf("second scavenge result = %q, want Success", done.Result)
	}
	if bytes.Contains(srv.Storage(), []byte("STOPPED-KEEPS")) {
		t.Error("the completed scavenge left the tombstoned stream's events")
	}
}
