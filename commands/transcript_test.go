package commands_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// totalsIndex says every session exists and has the given totals.
type totalsIndex struct{ totals commands.SessionTotals }

func (totalsIndex) SessionExists(context.Context, string) (bool, error)   { return true, nil }
func (totalsIndex) TitleOwner(context.Context, string) (string, error)    { return "", nil }
func (totalsIndex) LaneOfSession(context.Context, string) (string, error) { return "", nil }
func (x totalsIndex) SessionTotals(context.Context, string) (commands.SessionTotals, error) {
	return x.totals, nil
}

// TestUpdateMetadata_Totals: a report that would take a session's total
// past its bound is refused with ErrInvalidArgument and appends nothing.
func TestUpdateMetadata_Totals(t *testing.T) {
	const sid = "20260509_100000_aaaaaaaa"
	f64 := func(v float64) *float64 { return &v }
	tests := []struct {
		name    string
		totals  commands.SessionTotals
		update  events.SessionMetadataUpdated
		wantErr bool
	}{
		{"within the bounds", commands.SessionTotals{InputTokens: 10}, events.SessionMetadataUpdated{InputTokens: 5, EstimatedCostUSD: f64(0.5)}, false},
		{"up to MaxTokens", commands.SessionTotals{OutputTokens: domain.MaxTokens - 1}, events.SessionMetadataUpdated{OutputTokens: 1}, false},
		{"past MaxTokens", commands.SessionTotals{InputTokens: domain.MaxTokens}, events.SessionMetadataUpdated{InputTokens: 1}, true},
		{"max int64 twice (issue [V])", commands.SessionTotals{InputTokens: 1<<63 - 1}, events.SessionMetadataUpdated{InputTokens: 1<<63 - 1}, true},
		{"api calls past the bound", commands.SessionTotals{APICallCount: domain.MaxTokens}, events.SessionMetadataUpdated{APICallCount: 1}, true},
		{"reasoning tokens negative", commands.SessionTotals{}, events.SessionMetadataUpdated{ReasoningTokens: -1}, true},
		{"estimated cost 1e308", commands.SessionTotals{}, events.SessionMetadataUpdated{EstimatedCostUSD: f64(1e308)}, true},
		{"actual cost past MaxCostUSD", commands.SessionTotals{ActualCostUSD: 6e8}, events.SessionMetadataUpdated{ActualCostUSD: f64(6e8)}, true},
		{"no cost on a total past the bound", commands.SessionTotals{ActualCostUSD: 2e9}, events.SessionMetadataUpdated{Model: new("gpt")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithClock(func() time.Time { return t0 }))
			tc := h.Transcripts(totalsIndex{tt.totals})
			u := tt.update
			u.SessionID = sid
			_, err = tc.UpdateMetadata(context.Background(), commands.UpdateMetadata{Update: u})
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, domain.ErrInvalidArgument)) {
				t.Fatalf("UpdateMetadata(%+v) = %v, want error %v (ErrInvalidArgument)", tt.update, err, tt.wantErr)
			}
			head, err := store.Head(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]uint64{true: 0, false: 1}[tt.wantErr]; head != want {
				t.Errorf("head = %d, want %d", head, want)
			}
		})
	}
}

// countingIndex answers SessionExists from exists and counts the calls.
type countingIndex struct {
	totalsIndex
	exists map[string]bool
	asked  int
}

func (x *countingIndex) SessionExists(_ context.Context, id string) (bool, error) {
	x.asked++
	return x.exists[id], nil
}

// Given a session the read model has, when messages are appended to it,
// then a sole writer asks the read model once and any other handler every
// time; once the session is deleted, the sole writer asks again and takes
// the read model's answer, even one that does not show the delete yet.
func TestAppendMessage_SessionExistsAskedOnceBySoleWriter(t *testing.T) {
	const sid = "20260509_100000_aaaaaaaa"
	msg := events.Message{Role: "user"}
	for _, tc := range []struct {
		name       string
		soleWriter bool
		wantAsked  int
	}{
		{"sole writer", true, 1},
		{"one writer among several", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			opts := []commands.Option{commands.WithClock(func() time.Time { return t0 })}
			if tc.soleWriter {
				opts = append(opts, commands.WithSoleWriter())
			}
			index := &countingIndex{exists: map[string]bool{sid: true}}
			tcmd := commands.NewHandler(store, commands.DefaultConfig(), opts...).Transcripts(index)
			ctx := context.Background()
			for range 3 {
				if _, err := tcmd.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: msg}); err != nil {
					t.Fatal(err)
				}
			}
			if index.asked != tc.wantAsked {
				t.Fatalf("three appends asked the read model %d times, want %d", index.asked, tc.wantAsked)
			}
			// Deleted: the read model is asked again, and while it still
			// shows the session (it has not applied the delete), that
			// answer is not remembered.
			if _, err := tcmd.DeleteSession(ctx, commands.DeleteSession{SessionID: sid, Reason: events.DeleteRequested}); err != nil {
				t.Fatal(err)
			}
			index.asked = 0
			for range 2 {
				if _, err := tcmd.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: msg}); err != nil {
					t.Fatal(err)
				}
			}
			if index.asked != 2 {
				t.Fatalf("two appends after the delete asked the read model %d times, want 2", index.asked)
			}
			index.exists[sid] = false
			if _, err := tcmd.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: msg}); !errors.Is(err, commands.ErrSessionNotFound) {
				t.Fatalf("append once the read model applied the delete = %v, want ErrSessionNotFound", err)
			}
		})
	}
}
