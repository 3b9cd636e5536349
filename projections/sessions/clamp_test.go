package sessions_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
)

type clampLog struct {
	mu  sync.Mutex
	got []projections.Clamp
}

func (c *clampLog) ReportClamp(cl projections.Clamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, cl)
}

// Finding 1 of issue [V]: turns at the int64 maximum and costing 1e308, as
// an older build stored them, give bounded totals, a reported clamp per
// value, and a sessions.json that is written and valid.
func TestProjection_PoisonTurnsAreClamped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "sessions", "sessions.json")
	p, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{SessionsJSON: jsonPath})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	log := &clampLog{}
	p.ReportClampsTo(log)

	key := "agent:main:telegram:dm:nul\x00x"
	stream := events.LaneStream(key)
	const maxInt64 = math.MaxInt64
	given := []events.Event{
		events.SessionCreated{SessionKey: key, SessionID: "s1", Platform: "telegram", ChatType: "dm", At: t0},
		events.TurnCompleted{SessionID: "s1", InputTokens: maxInt64, OutputTokens: maxInt64, At: t0},
		events.TurnCompleted{SessionID: "s1", InputTokens: maxInt64, EstimatedCostUSD: 1e308, At: t0},
		events.TurnCompleted{SessionID: "s1", EstimatedCostUSD: 1e308, At: t0},
	}
	var batch []events.Envelope
	for i, e := range given {
		batch = append(batch, events.Envelope{Stream: stream, Version: uint64(i + 1), Position: uint64(i + 1), Type: e.EventType(), Event: e})
	}
	if err := p.Apply(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush() = %v", err)
	}

	type clamp struct {
		Position    uint64
		Field, Rule string
	}
	var got []clamp
	for _, c := range log.got {
		if c.Projection != sessions.Name || c.Stream != stream {
			t.Errorf("clamp %+v does not name the projection and stream", c)
		}
		got = append(got, clamp{c.Position, c.Field, c.Rule})
	}
	want := []clamp{
		{2, "input_tokens", "saturated"}, {2, "output_tokens", "saturated"}, {2, "total_tokens", "saturated"},
		{3, "input_tokens", "saturated"}, {3, "total_tokens", "saturated"}, {3, "estimated_cost_usd", "quarantined"},
		{4, "estimated_cost_usd", "quarantined"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clamps (-want +got):\n%s", diff)
	}

	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil || !utf8.Valid(data) {
		t.Fatalf("sessions.json is not valid JSON in UTF-8 (%v):\n%s", err, data)
	}
	var e struct {
		InputTokens int64   `json:"input_tokens"`
		TotalTokens int64   `json:"total_tokens"`
		Cost        float64 `json:"estimated_cost_usd"`
	}
	if err := json.Unmarshal(entries[key], &e); err != nil {
		t.Fatal(err)
	}
	if e.InputTokens != domain.MaxTokens || e.TotalTokens != domain.MaxTokens || e.Cost != 0 {
		t.Errorf("sessions.json entry = %+v, want saturated tokens and cost 0", e)
	}
}
