package domain_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

const sid1 = "20260509_100000_aaaaaaaa"

func overrideSet(o *events.ModelOverride) events.ModelOverrideSet {
	return events.ModelOverrideSet{SessionID: sid1, Override: o, At: t0}
}

func metadataSet(key, value string) events.EntryMetadataSet {
	return events.EntryMetadataSet{SessionID: sid1, Key: key, Value: json.RawMessage(value), At: t0}
}

func TestLane_SetModelOverride(t *testing.T) {
	gpt := &domain.ModelOverride{Model: "gpt-5", Provider: "openai"}
	set := func(o *domain.ModelOverride) func(domain.Lane) ([]events.Event, error) {
		return func(l domain.Lane) ([]events.Event, error) { return l.SetModelOverride(o, t0) }
	}
	for _, s := range []testfixtures.LaneScenario{
		{Name: "an override is set", Given: []events.Event{created(t0)}, When: set(gpt),
			Then: []events.Event{overrideSet(&events.ModelOverride{Model: "gpt-5", Provider: "openai"})}},
		{Name: "the same override again changes nothing",
			Given: []events.Event{created(t0), overrideSet(&events.ModelOverride{Model: "gpt-5", Provider: "openai"})}, When: set(gpt)},
		{Name: "nil clears it",
			Given: []events.Event{created(t0), overrideSet(&events.ModelOverride{Model: "gpt-5"})}, When: set(nil),
			Then: []events.Event{overrideSet(nil)}},
		{Name: "an override of empty fields clears it too",
			Given: []events.Event{created(t0), overrideSet(&events.ModelOverride{Model: "gpt-5"})}, When: set(&domain.ModelOverride{}),
			Then: []events.Event{overrideSet(nil)}},
		{Name: "clearing none changes nothing", Given: []events.Event{created(t0)}, When: set(nil)},
		{Name: "no lane", When: set(gpt), ThenErr: domain.ErrLaneNotFound},
		{Name: "a field over the bound", Given: []events.Event{created(t0)},
			When: set(&domain.ModelOverride{Model: strings.Repeat("m", domain.MaxModelOverrideField+1)}), ThenErr: domain.ErrInvalidArgument},
	} {
		t.Run(s.Name, s.Run)
	}
}

func TestLane_SetEntryMetadata(t *testing.T) {
	set := func(key, value string) func(domain.Lane) ([]events.Event, error) {
		return func(l domain.Lane) ([]events.Event, error) {
			return l.SetEntryMetadata(key, json.RawMessage(value), t0)
		}
	}
	full := []events.Event{created(t0)}
	for i := range domain.MaxMetadataKeys {
		full = append(full, metadataSet(strings.Repeat("k", i+1), "1"))
	}
	for _, s := range []testfixtures.LaneScenario{
		{Name: "a value is set, compacted", Given: []events.Event{created(t0)}, When: set("w", `{ "ts": "1.2" }`),
			Then: []events.Event{metadataSet("w", `{"ts":"1.2"}`)}},
		{Name: "null is a value", Given: []events.Event{created(t0)}, When: set("w", `null`),
			Then: []events.Event{metadataSet("w", `null`)}},
		{Name: "the same value again changes nothing", Given: []events.Event{created(t0), metadataSet("w", `{"ts":"1.2"}`)},
			When: set("w", `{"ts": "1.2"}`)},
		{Name: "another value replaces it", Given: []events.Event{created(t0), metadataSet("w", `1`)}, When: set("w", `2`),
			Then: []events.Event{metadataSet("w", `2`)}},
		{Name: "no lane", When: set("w", `1`), ThenErr: domain.ErrLaneNotFound},
		{Name: "not JSON", Given: []events.Event{created(t0)}, When: set("w", `{`), ThenErr: domain.ErrInvalidArgument},
		{Name: "empty key", Given: []events.Event{created(t0)}, When: set("", `1`), ThenErr: domain.ErrInvalidArgument},
		{Name: "a value over the bound", Given: []events.Event{created(t0)},
			When: set("w", `"`+strings.Repeat("x", domain.MaxMetadataValue)+`"`), ThenErr: domain.ErrInvalidArgument},
		{Name: "a new key past the most keys", Given: full, When: set("new", `1`), ThenErr: domain.ErrInvalidArgument},
		{Name: "a held key at the most keys", Given: full, When: set("k", `2`), Then: []events.Event{metadataSet("k", `2`)}},
	} {
		t.Run(s.Name, s.Run)
	}
}

// Given a lane's session with an override and metadata, when the lane
// moves on, then a new session (reset, auto-reset, /resume, force_new)
// starts without them, a compression split keeps them, an event of an
// older session changes nothing, and a person erasure empties the values.
func TestEntryStateBelongsToTheSession(t *testing.T) {
	withState := []events.Event{created(t0), overrideSet(&events.ModelOverride{Model: "gpt-5"}),
		metadataSet("b", `2`), metadataSet("a", `"alice"`)}
	later := t0.Add(time.Hour)
	type state struct {
		Override *domain.ModelOverride
		Metadata []domain.MetadataItem
	}
	kept := state{&domain.ModelOverride{Model: "gpt-5"}, []domain.MetadataItem{{Key: "a", Value: json.RawMessage(`"alice"`)}, {Key: "b", Value: json.RawMessage(`2`)}}}
	tests := []struct {
		name string
		then events.Event
		want state
	}{
		{"nothing else", events.Touched{At: later}, kept},
		{"a compression split", events.SessionCompressed{SessionID: "20260509_110000_cccccccc", PreviousSessionID: sid1, At: later}, kept},
		{"/new", events.SessionReset{SessionID: "20260509_110000_cccccccc", PreviousSessionID: sid1, At: later}, state{}},
		{"an auto-reset", autoReset(domain.AutoResetIdle, true, later), state{}},
		{"/resume", events.SessionSwitched{SessionID: "20260509_110000_cccccccc", PreviousSessionID: sid1, At: later}, state{}},
		{"an override of an older session", events.ModelOverrideSet{SessionID: "20260508_000000_dddddddd", At: later}, kept},
		{"metadata of an older session", events.EntryMetadataSet{SessionID: "20260508_000000_dddddddd", Key: "c", Value: json.RawMessage(`1`), At: later}, kept},
		{"a person erasure", events.LaneErased{ErasureID: "er_1", Reason: events.ErasurePerson, At: later},
			state{kept.Override, []domain.MetadataItem{{Key: "a", Value: json.RawMessage(`null`)}, {Key: "b", Value: json.RawMessage(`null`)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := domain.Replay(append(append([]events.Event{}, withState...), tt.then))
			if diff := cmp.Diff(tt.want, state{l.ModelOverride, l.Metadata}); diff != "" {
				t.Errorf("after %s (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}
