package domain_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"hermes/domain"
	"hermes/events"
)

// poisonHistory is the lane history of cmd/hermes/testdata/poison (finding
// 1 of issue [V]), one "type json" line per event, as an older build
// stored it.
var poisonHistory = strings.Join([]string{
	`lane.session_created.v1 {"session_key":"agent:main:telegram:dm:777","session_id":"20261123_213415_6862bdb9","force_new":false,"origin":{"platform":"telegram","chat_id":"777","chat_type":"dm","user_id":"7","user_name":"Poison"},"platform":"telegram","chat_type":"dm","at":"2026-11-23T21:34:15.733113874Z"}`,
	`lane.turn_started.v1 {"turn_id":"turn_6805f95c1e3b644b","session_id":"20261123_213415_6862bdb9","at":"2026-11-23T21:34:16.224976675Z"}`,
	`lane.turn_completed.v1 {"turn_id":"turn_6805f95c1e3b644b","session_id":"20261123_213415_6862bdb9","input_tokens":9223372036854775807,"output_tokens":9223372036854775807,"estimated_cost_usd":0,"at":"2026-11-23T21:34:16.236637881Z"}`,
	`lane.turn_completed.v1 {"turn_id":"","session_id":"20261123_213415_6862bdb9","input_tokens":9223372036854775807,"estimated_cost_usd":1e+308,"at":"2026-11-23T21:34:16.245859498Z"}`,
	`lane.turn_completed.v1 {"turn_id":"","session_id":"20261123_213415_6862bdb9","estimated_cost_usd":1e+308,"at":"2026-11-23T21:34:16.25418055Z"}`,
}, "\n")

// FuzzEvolve folds arbitrary stored lane histories (one "type json" line
// per event; lines that do not decode are skipped, as a store would refuse
// them) and then a turn with arbitrary counts, decided and as an older
// build might have stored it. The fold never panics, no sum goes negative
// or non-finite, and every string of the lane is valid UTF-8; a refused
// decision proposes no event.
func FuzzEvolve(f *testing.F) {
	f.Add(poisonHistory, int64(math.MaxInt64), int64(math.MaxInt64), int64(0), 1e308)
	f.Add(poisonHistory, int64(-1), int64(1), int64(math.MinInt64), math.Inf(-1))
	f.Add("lane.session_created.v1 {\"session_key\":\"k\\u0000\xff\",\"session_id\":\"s\",\"display_name\":\"\\ud800\",\"at\":\"2026-01-01T00:00:00Z\"}\n"+
		`lane.touched.v1 {"last_prompt_tokens":-5,"at":"2026-01-01T00:00:01Z"}`, int64(1), int64(2), int64(3), 0.5)
	f.Add("", int64(0), int64(0), int64(0), math.NaN())
	f.Fuzz(func(t *testing.T, history string, in, out, cache int64, cost float64) {
		var l domain.Lane
		for _, line := range strings.Split(history, "\n") {
			typ, data, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			e, err := events.Decode(typ, []byte(data))
			if err != nil {
				continue
			}
			l = evolveChecked(t, l, e)
		}

		outcome := domain.TurnOutcome{InputTokens: in, OutputTokens: out, CacheReadTokens: cache, CacheWriteTokens: in, EstimatedCostUSD: cost}
		decided, err := l.CompleteTurn(outcome, t0)
		if err != nil && decided != nil {
			t.Fatalf("CompleteTurn refused (%v) but proposed %v", err, decided)
		}
		for _, e := range decided {
			l = evolveChecked(t, l, e)
		}
		stored := events.TurnCompleted{InputTokens: in, OutputTokens: out, CacheReadTokens: cache, CacheWriteTokens: in, EstimatedCostUSD: cost}
		evolveChecked(t, l, stored)
	})
}

// evolveChecked folds e into l and checks the lane's invariants.
func evolveChecked(t *testing.T, l domain.Lane, e events.Event) domain.Lane {
	t.Helper()
	next, clamps := domain.EvolveClamped(l, e)
	if _, isTurn := e.(events.TurnCompleted); !isTurn && clamps != nil {
		t.Fatalf("EvolveClamped(%T) reported clamps %v", e, clamps)
	}
	sums := map[string]int64{
		"input": next.InputTokens, "output": next.OutputTokens, "cache_read": next.CacheReadTokens,
		"cache_write": next.CacheWriteTokens, "total": next.TotalTokens,
	}
	for name, v := range sums {
		if v < 0 {
			t.Fatalf("after %T the %s token sum is %d", e, name, v)
		}
	}
	if c := next.EstimatedCostUSD; math.IsNaN(c) || c < 0 || c > domain.MaxCostUSD {
		t.Fatalf("after %T the cost sum is %v", e, c)
	}
	if _, isTurn := e.(events.TurnCompleted); isTurn && next.SessionID == l.SessionID {
		if next.InputTokens < l.InputTokens || next.TotalTokens < l.TotalTokens || next.EstimatedCostUSD < l.EstimatedCostUSD {
			t.Fatalf("a completed turn decreased a sum: %+v then %+v", l, next)
		}
	}
	if path, ok := invalidString(reflect.ValueOf(next), "Lane"); ok {
		t.Fatalf("after %T %s is not valid UTF-8", e, path)
	}
	return next
}

// invalidString returns the path of the first string in v that is not
// valid UTF-8.
func invalidString(v reflect.Value, path string) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return path, !utf8.ValidString(v.String())
	case reflect.Struct:
		for i := range v.NumField() {
			if p, bad := invalidString(v.Field(i), path+"."+v.Type().Field(i).Name); bad {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p, bad := invalidString(v.Index(i), path+"[]"); bad {
				return p, true
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return invalidString(v.Elem(), path)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p, bad := invalidString(it.Value(), path+"[]"); bad {
				return p, true
			}
		}
	}
	return "", false
}
