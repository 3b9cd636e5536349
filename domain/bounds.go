package domain

import (
	"fmt"
	"math"
)

// The bounds of the counts and costs hermes adds up. A single report and
// every running total it adds to stay within them, so a sum can never
// overflow (int64) or become +Inf (float64): a report that would take a
// total past its bound is refused with ErrInvalidArgument, and the log
// never holds the fact that would.
const (
	// MaxTokens bounds a token count and every total of token counts:
	// 2^53, the largest integer every JSON client reads exactly.
	MaxTokens int64 = 1 << 53
	// MaxCostUSD bounds a cost in US dollars and every total of costs.
	MaxCostUSD = 1e9
)

// CheckTokens refuses a token count delta that is negative, or that would
// take total past MaxTokens; name is the field in the refusal. A zero delta
// is always accepted (even on a total already past the bound).
func CheckTokens(name string, total, delta int64) error {
	switch {
	case delta < 0:
		return fmt.Errorf("%w: %s %d is negative", ErrInvalidArgument, name, delta)
	case delta > MaxTokens:
		return fmt.Errorf("%w: %s %d is more than %d", ErrInvalidArgument, name, delta, MaxTokens)
	case delta > 0 && total > MaxTokens-delta:
		return fmt.Errorf("%w: %s %d would take the total (%d) past %d", ErrInvalidArgument, name, delta, total, MaxTokens)
	}
	return nil
}

// CheckCost refuses a cost delta that is not a finite number, is negative,
// or would take total past MaxCostUSD; name is the field in the refusal. A
// zero delta is always accepted.
func CheckCost(name string, total, delta float64) error {
	switch {
	case math.IsNaN(delta) || math.IsInf(delta, 0):
		return fmt.Errorf("%w: %s is not a finite number", ErrInvalidArgument, name)
	case delta < 0:
		return fmt.Errorf("%w: %s %g is negative", ErrInvalidArgument, name, delta)
	case delta > MaxCostUSD:
		return fmt.Errorf("%w: %s %g is more than %g", ErrInvalidArgument, name, delta, MaxCostUSD)
	case delta > 0 && !(total+delta <= MaxCostUSD):
		return fmt.Errorf("%w: %s %g would take the total (%g) past %g", ErrInvalidArgument, name, delta, total, MaxCostUSD)
	}
	return nil
}
