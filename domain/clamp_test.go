package domain_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

const maxInt64 = math.MaxInt64

func TestEvolveClamped_TurnCompleted(t *testing.T) {
	sid := "20260509_100000_aaaaaaaa"
	turn := func(in, out int64, cost float64) events.Event {
		return events.TurnCompleted{SessionID: sid, InputTokens: in, OutputTokens: out, EstimatedCostUSD: cost, At: t0}
	}
	type totals struct {
		In, Out, Total int64
		Cost           float64
	}
	tests := []struct {
		name       string
		given      []events.Event
		when       events.Event
		want       totals
		wantClamps []domain.Clamp
	}{
		{
			name:  "ordinary values are taken as written",
			given: []events.Event{created(t0), turn(10, 5, 0.25)},
			when:  turn(1, 2, 0.5),
			want:  totals{In: 11, Out: 7, Total: 18, Cost: 0.75},
		},
		{
			name:  "a token sum saturates at the int64 maximum instead of wrapping",
			given: []events.Event{created(t0), turn(maxInt64, maxInt64, 0)},
			when:  turn(maxInt64, 0, 0),
			want:  totals{In: domain.MaxTokens, Out: domain.MaxTokens, Total: domain.MaxTokens},
			wantClamps: []domain.Clamp{
				{Field: "input_tokens", Rule: domain.ClampSaturated},
				{Field: "total_tokens", Rule: domain.ClampSaturated},
			},
		},
		{
			name:  "a negative count is quarantined",
			given: []events.Event{created(t0), turn(10, 10, 0)},
			when:  turn(-5, 3, 0),
			want:  totals{In: 10, Out: 13, Total: 23},
			wantClamps: []domain.Clamp{
				{Field: "input_tokens", Rule: domain.ClampQuarantined},
			},
		},
		{
			name:       "a cost of 1e308 is quarantined, the sum stays finite",
			given:      []events.Event{created(t0), turn(0, 0, 1e308)},
			when:       turn(0, 0, 1e308),
			want:       totals{},
			wantClamps: []domain.Clamp{{Field: "estimated_cost_usd", Rule: domain.ClampQuarantined}},
		},
		{
			name:       "NaN and negative costs are quarantined",
			given:      []events.Event{created(t0), turn(0, 0, math.NaN()), turn(0, 0, -1)},
			when:       turn(0, 0, math.Inf(1)),
			want:       totals{},
			wantClamps: []domain.Clamp{{Field: "estimated_cost_usd", Rule: domain.ClampQuarantined}},
		},
		{
			name:       "a cost sum saturates at MaxCostUSD",
			given:      []events.Event{created(t0), turn(0, 0, domain.MaxCostUSD)},
			when:       turn(0, 0, 1),
			want:       totals{Cost: domain.MaxCostUSD},
			wantClamps: []domain.Clamp{{Field: "estimated_cost_usd", Rule: domain.ClampSaturated}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := domain.Replay(tt.given)
			got, clamps := domain.EvolveClamped(l, tt.when)
			if diff := cmp.Diff(tt.wantClamps, clamps); diff != "" {
				t.Errorf("EvolveClamped clamps (-want +got):\n%s", diff)
			}
			if plain := domain.Evolve(l, tt.when); !cmp.Equal(plain, got) {
				t.Errorf("EvolveClamped(...) lane differs from Evolve(...)")
			}
			gotTotals := totals{In: got.InputTokens, Out: got.OutputTokens, Total: got.TotalTokens, Cost: got.EstimatedCostUSD}
			if diff := cmp.Diff(tt.want, gotTotals); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddTokens(t *testing.T) {
	tests := []struct {
		sum, n   int64
		want     int64
		wantRule string
	}{
		{0, 0, 0, ""},
		{1, 2, 3, ""},
		{domain.MaxTokens - 1, 1, domain.MaxTokens, domain.ClampSaturated},
		{domain.MaxTokens, 0, domain.MaxTokens, ""},
		{domain.MaxTokens, 1, domain.MaxTokens, domain.ClampSaturated},
		{1, maxInt64, domain.MaxTokens, domain.ClampSaturated},
		// A sum past the cap (an older build's wrapped-free total) comes back to it.
		{maxInt64, 0, domain.MaxTokens, domain.ClampSaturated},
		{5, -1, 5, domain.ClampQuarantined},
		{5, math.MinInt64, 5, domain.ClampQuarantined},
	}
	for _, tt := range tests {
		got, rule := domain.AddTokens(tt.sum, tt.n)
		if got != tt.want || rule != tt.wantRule {
			t.Errorf("AddTokens(%d, %d) = %d, %q, want %d, %q", tt.sum, tt.n, got, rule, tt.want, tt.wantRule)
		}
	}
}
