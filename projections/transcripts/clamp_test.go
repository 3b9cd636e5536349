package transcripts

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
	"hermes/projections"
)

// clampLog records reported clamps.
type clampLog struct {
	mu  sync.Mutex
	got []projections.Clamp
}

func (c *clampLog) ReportClamp(cl projections.Clamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, cl)
}

func TestMetadataUpdated_Clamps(t *testing.T) {
	const maxInt64 = math.MaxInt64
	tests := []struct {
		name       string
		given      []events.SessionMetadataUpdated
		wantTokens int64
		wantCost   *float64
		wantClamps []string // field/rule
	}{
		{
			name: "token sums saturate at the int64 maximum (finding 2)",
			given: []events.SessionMetadataUpdated{
				{InputTokens: maxInt64}, {InputTokens: maxInt64},
			},
			wantTokens: domain.MaxTokens,
			wantClamps: []string{"input_tokens/saturated", "input_tokens/saturated"},
		},
		{
			name: "a negative count is quarantined",
			given: []events.SessionMetadataUpdated{
				{InputTokens: 7}, {InputTokens: -3},
			},
			wantTokens: 7,
			wantClamps: []string{"input_tokens/quarantined"},
		},
		{
			name: "a cost of 1e308 is quarantined (finding 2)",
			given: []events.SessionMetadataUpdated{
				{EstimatedCostUSD: ptr(1e308)}, {EstimatedCostUSD: ptr(1e308)},
			},
			wantClamps: []string{"estimated_cost_usd/quarantined", "estimated_cost_usd/quarantined"},
		},
		{
			name: "a cost sum saturates at MaxCostUSD",
			given: []events.SessionMetadataUpdated{
				{EstimatedCostUSD: ptr(domain.MaxCostUSD)}, {EstimatedCostUSD: ptr(0.5)},
			},
			wantCost:   ptr(domain.MaxCostUSD),
			wantClamps: []string{"estimated_cost_usd/saturated", "estimated_cost_usd/saturated"},
		},
		{
			name: "ordinary values are taken as written",
			given: []events.SessionMetadataUpdated{
				{InputTokens: 1, EstimatedCostUSD: ptr(0.25)}, {InputTokens: 2, EstimatedCostUSD: ptr(0.5)},
			},
			wantTokens: 3,
			wantCost:   ptr(0.75),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openTemp(t)
			log := &clampLog{}
			p.ReportClampsTo(log)
			h := newHistory()
			for i, e := range tt.given {
				e.SessionID, e.At = "s1", at(i)
				h.tr("s1", e)
			}
			mustApply(t, p, h.all)
			s := mustSession(t, p.Reader, "s1")
			if s.InputTokens != tt.wantTokens || !cmp.Equal(s.EstimatedCostUSD, tt.wantCost) {
				t.Errorf("session = %d tokens, cost %v, want %d, %v", s.InputTokens, fmtPtr(s.EstimatedCostUSD), tt.wantTokens, fmtPtr(tt.wantCost))
			}
			var got []string
			for _, c := range log.got {
				if c.Projection != Name || c.Stream != events.TranscriptStream("s1") || c.Position == 0 {
					t.Errorf("clamp %+v does not name the projection, stream and position", c)
				}
				got = append(got, c.Field+"/"+c.Rule)
			}
			if diff := cmp.Diff(tt.wantClamps, got); diff != "" {
				t.Errorf("clamps (-want +got):\n%s", diff)
			}
			if _, err := p.TokenStats(context.Background()); err != nil {
				t.Errorf("TokenStats() = %v", err)
			}
		})
	}
}

func fmtPtr(f *float64) string {
	if f == nil {
		return "NULL"
	}
	return fmt.Sprint(*f)
}

// FuzzApplyMetadata applies stored metadata updates with arbitrary counts
// and costs and a message with arbitrary content bytes (decoded as a store
// would) to a real state.db: Apply never fails or panics, no sum goes
// negative or non-finite, and every read answer encodes to valid UTF-8.
func FuzzApplyMetadata(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 1e308, 1e308, []byte("\"a\xff\xfeb\""))
	f.Add(int64(-1), int64(math.MinInt64), math.Inf(1), math.NaN(), []byte(`"lone \ud800 surrogate"`))
	f.Add(int64(1), int64(2), 0.25, -0.5, []byte(`[{"type":"text","text":"\udc00x"}]`))
	p, err := Open(filepath.Join(f.TempDir(), "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	h := newHistory()
	var mu sync.Mutex
	n := 0
	f.Fuzz(func(t *testing.T, tokensA, tokensB int64, costA, costB float64, content []byte) {
		mu.Lock()
		defer mu.Unlock()
		n++
		sid := fmt.Sprintf("s%d", n)
		msg := []byte(fmt.Sprintf(`{"session_id":%q,"message":{"role":"user","content":%s},"at":"2026-03-01T09:00:00Z"}`, sid, content))
		start := len(h.all)
		if e, err := events.Decode(events.TypeMessageAppended, msg); err == nil {
			h.tr(sid, e)
		}
		h.tr(sid,
			events.SessionMetadataUpdated{SessionID: sid, InputTokens: tokensA, ReasoningTokens: tokensB, APICallCount: tokensA,
				EstimatedCostUSD: &costA, ActualCostUSD: &costB, At: at(n)},
			events.SessionMetadataUpdated{SessionID: sid, InputTokens: tokensB, ReasoningTokens: tokensA, APICallCount: tokensB,
				EstimatedCostUSD: &costB, ActualCostUSD: &costA, At: at(n)})
		if err := p.Apply(context.Background(), h.all[start:]); err != nil {
			t.Fatalf("Apply() = %v", err)
		}
		s := mustSession(t, p.Reader, sid)
		for name, v := range map[string]int64{"input": s.InputTokens, "reasoning": s.ReasoningTokens, "api_calls": s.APICallCount} {
			if v < 0 {
				t.Fatalf("%s sum = %d", name, v)
			}
		}
		for name, c := range map[string]*float64{"estimated": s.EstimatedCostUSD, "actual": s.ActualCostUSD} {
			if c != nil && (math.IsNaN(*c) || *c < 0 || *c > domain.MaxCostUSD) {
				t.Fatalf("%s cost sum = %v", name, *c)
			}
		}
		ctx := context.Background()
		var answers []any
		answers = append(answers, s)
		if v, err := p.ExportSession(ctx, sid); err == nil {
			answers = append(answers, v)
		} else {
			t.Fatalf("ExportSession() = %v", err)
		}
		if v, err := p.Recent(ctx, 5); err == nil {
			answers = append(answers, v)
		} else {
			t.Fatalf("Recent() = %v", err)
		}
		if v, err := p.Messages(ctx, sid, true); err == nil {
			answers = append(answers, v)
		} else {
			t.Fatalf("Messages() = %v", err)
		}
		if v, err := p.TokenStats(ctx); err == nil {
			answers = append(answers, v)
		} else {
			t.Fatalf("TokenStats() = %v", err)
		}
		for _, a := range answers {
			out, err := json.Marshal(a)
			if err != nil {
				t.Fatalf("encode %T: %v", a, err)
			}
			if !utf8.Valid(out) {
				t.Fatalf("%T encodes to invalid UTF-8: %q", a, out)
			}
		}
	})
}
