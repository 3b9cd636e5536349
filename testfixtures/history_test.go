package testfixtures_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/testfixtures"
)

func TestGenerateHistoryIsDeterministicAndMixed(t *testing.T) {
	o := testfixtures.HistoryOptions{Events: 5000, Lanes: 50, Seed: 7, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.3}
	collect := func() []testfixtures.Batch {
		var out []testfixtures.Batch
		if err := testfixtures.GenerateHistory(o, func(b testfixtures.Batch) error { out = append(out, b); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := collect(), collect()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different histories")
	}
	var lane, msgs int
	for _, batch := range a {
		for _, p := range batch.Proposed {
			if _, ok := p.Event.(events.MessageAppended); ok {
				msgs++
			} else {
				lane++
			}
		}
	}
	if lane+msgs != o.Events {
		t.Fatalf("generated %d events, want %d", lane+msgs, o.Events)
	}
	if share := float64(lane) / float64(o.Events); share < 0.2 || share > 0.4 {
		t.Fatalf("lane events are %.0f%% of the history, want about 30%%", share*100)
	}
}

func TestLoadHistory(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o := testfixtures.HistoryOptions{Events: 2000, Lanes: 20, Seed: 1, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	if err := testfixtures.LoadHistory(context.Background(), store, o, 8); err != nil {
		t.Fatal(err)
	}
	head, _ := store.Head(context.Background())
	if head != 2000 {
		t.Fatalf("head = %d, want 2000", head)
	}
}
