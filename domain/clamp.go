package domain

import (
	"math"

	"hermes/events"
)

// The folds of token counts and costs take every reported value they can and
// bound the rest, so that no event in the log, however it got there (an older
// build, an import, a buggy cost estimator), can overflow a sum, make it
// non-finite, or fail a read model. The same rules apply in the lane fold
// below and in both read models (lanes.db and state.db); docs/FOLD_LIMITS.md
// lists them. The caps are the bounds of the door (bounds.go): MaxTokens and
// MaxCostUSD.

// Clamp rules, as reported in [Clamp.Rule].
const (
	// ClampSaturated: the sum reached its cap with this value.
	ClampSaturated = "saturated"
	// ClampQuarantined: the value was left out of the sum (a negative
	// count, or a cost that is NaN, infinite, negative or above
	// MaxCostUSD).
	ClampQuarantined = "quarantined"
)

// Clamp is one value of an event that a fold did not take as written:
// Field is the event's JSON field name, Rule one of the Clamp rules.
type Clamp struct {
	Field string
	Rule  string
}

// TokenDelta is the part of a reported token or call count a sum takes:
// the count itself, or 0 and ClampQuarantined when it is negative (counts
// only grow; a negative one is a defect, not a correction).
func TokenDelta(n int64) (int64, string) {
	if n < 0 {
		return 0, ClampQuarantined
	}
	return n, ""
}

// AddTokens adds a reported count to a sum of counts: a negative count is
// quarantined, and the sum saturates at MaxTokens instead of wrapping. The
// rule is "" when the count was taken as written and the sum is below the
// cap.
func AddTokens(sum, n int64) (int64, string) {
	d, rule := TokenDelta(n)
	if rule != "" {
		return sum, rule
	}
	if d > MaxTokens-max(sum, 0) {
		return MaxTokens, ClampSaturated
	}
	sum += d
	if d > 0 && sum == MaxTokens {
		return sum, ClampSaturated
	}
	return sum, ""
}

// CostTaken reports whether a reported cost enters a cost sum: it must be a
// finite number in [0, MaxCostUSD]. Any other cost is quarantined.
func CostTaken(c float64) bool {
	return !math.IsNaN(c) && c >= 0 && c <= MaxCostUSD
}

// AddCost adds a reported cost to a cost sum: a cost CostTaken refuses is
// quarantined, and the sum saturates at MaxCostUSD, so it stays finite.
func AddCost(sum, c float64) (float64, string) {
	if !CostTaken(c) {
		return sum, ClampQuarantined
	}
	sum += c
	if c > 0 && sum >= MaxCostUSD {
		return MaxCostUSD, ClampSaturated
	}
	return sum, ""
}

// addUsage folds a completed turn's token and cost deltas into the lane's
// totals and says which values it clamped (nil when none).
func (l Lane) addUsage(e events.TurnCompleted) (Lane, []Clamp) {
	var clamps []Clamp
	note := func(field, rule string) {
		if rule != "" {
			clamps = append(clamps, Clamp{Field: field, Rule: rule})
		}
	}
	var rule string
	l.InputTokens, rule = AddTokens(l.InputTokens, e.InputTokens)
	note("input_tokens", rule)
	l.OutputTokens, rule = AddTokens(l.OutputTokens, e.OutputTokens)
	note("output_tokens", rule)
	l.CacheReadTokens, rule = AddTokens(l.CacheReadTokens, e.CacheReadTokens)
	note("cache_read_tokens", rule)
	l.CacheWriteTokens, rule = AddTokens(l.CacheWriteTokens, e.CacheWriteTokens)
	note("cache_write_tokens", rule)
	// The total counts what the input and output sums took; a quarantined
	// count is already reported under its own field.
	in, _ := TokenDelta(e.InputTokens)
	out, _ := TokenDelta(e.OutputTokens)
	total, r1 := AddTokens(l.TotalTokens, in)
	total, r2 := AddTokens(total, out)
	l.TotalTokens = total
	if r1 != "" || r2 != "" {
		note("total_tokens", ClampSaturated)
	}
	l.EstimatedCostUSD, rule = AddCost(l.EstimatedCostUSD, e.EstimatedCostUSD)
	note("estimated_cost_usd", rule)
	return l, clamps
}

// EvolveClamped is [Evolve] that also returns the values of e the fold
// clamped or quarantined (nil when it took e as written), for the read
// models to log and count. The lane it returns is Evolve's.
func EvolveClamped(l Lane, e events.Event) (Lane, []Clamp) {
	var clamps []Clamp
	if tc, ok := e.(events.TurnCompleted); ok {
		_, clamps = l.addUsage(tc)
	}
	return Evolve(l, e), clamps
}
