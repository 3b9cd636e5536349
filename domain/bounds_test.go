package domain_test

import (
	"errors"
	"math"
	"testing"

	"hermes/domain"
)

func TestCheckTokens(t *testing.T) {
	tests := []struct {
		name         string
		total, delta int64
		wantErr      bool
	}{
		{"zero on zero", 0, 0, false},
		{"up to the bound", domain.MaxTokens - 5, 5, false},
		{"one past the bound", domain.MaxTokens - 5, 6, true},
		{"negative", 0, -1, true},
		{"max int64", 0, math.MaxInt64, true},
		{"max int64 on a total", 10, math.MaxInt64, true},
		{"a delta past the bound on its own", 0, domain.MaxTokens + 1, true},
		{"zero on a total already past the bound", math.MaxInt64, 0, false},
		{"one on a total already past the bound", math.MaxInt64, 1, true},
	}
	for _, tt := range tests {
		err := domain.CheckTokens("input_tokens", tt.total, tt.delta)
		if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, domain.ErrInvalidArgument)) {
			t.Errorf("%s: CheckTokens(%d, %d) = %v, want error %v (ErrInvalidArgument)", tt.name, tt.total, tt.delta, err, tt.wantErr)
		}
	}
}

func TestCheckCost(t *testing.T) {
	tests := []struct {
		name         string
		total, delta float64
		wantErr      bool
	}{
		{"zero", 0, 0, false},
		{"a cent", 10, 0.01, false},
		{"up to the bound", domain.MaxCostUSD - 1, 1, false},
		{"past the bound", domain.MaxCostUSD - 1, 2, true},
		{"1e308", 0, 1e308, true},
		{"negative", 0, -0.01, true},
		{"+Inf", 0, math.Inf(1), true},
		{"NaN", 0, math.NaN(), true},
		{"one on a NaN total", math.NaN(), 1, true},
		{"one on an infinite total", math.Inf(1), 1, true},
		{"zero on an infinite total", math.Inf(1), 0, false},
	}
	for _, tt := range tests {
		err := domain.CheckCost("estimated_cost_usd", tt.total, tt.delta)
		if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, domain.ErrInvalidArgument)) {
			t.Errorf("%s: CheckCost(%g, %g) = %v, want error %v (ErrInvalidArgument)", tt.name, tt.total, tt.delta, err, tt.wantErr)
		}
	}
}
