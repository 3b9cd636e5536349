package testfixtures

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

// LaneScenario is one given/when/then case for the lane aggregate: given a
// history, when a decide method runs, then these events (or this error).
type LaneScenario struct {
	Name    string
	Given   []events.Event
	When    func(l domain.Lane) ([]events.Event, error)
	Then    []events.Event
	ThenErr error
}

// Run checks the scenario: the decided events equal Then (no events is the
// same as nil), or the error matches ThenErr with errors.Is.
func (s LaneScenario) Run(t *testing.T) {
	t.Helper()
	got, err := s.When(domain.Replay(s.Given))
	if s.ThenErr != nil {
		if !errors.Is(err, s.ThenErr) {
			t.Fatalf("%s: error = %v, want %v", s.Name, err, s.ThenErr)
		}
		if len(got) != 0 {
			t.Fatalf("%s: a refused command decided events %v", s.Name, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: unexpected error %v", s.Name, err)
	}
	if len(got) == 0 {
		got = nil
	}
	if diff := cmp.Diff(s.Then, got); diff != "" {
		t.Fatalf("%s: decided events mismatch (-want +got):\n%s", s.Name, diff)
	}
}

// Envelopes wraps a history in envelopes of one stream with versions 1..n,
// as a store would return it, for time-travel tests.
func Envelopes(stream string, history []events.Event) []events.Envelope {
	out := make([]events.Envelope, len(history))
	for i, e := range history {
		out[i] = events.Envelope{
			Stream:     stream,
			Version:    uint64(i + 1),
			Position:   uint64(i + 1),
			Type:       e.EventType(),
			RecordedAt: e.OccurredAt(),
			Event:      e,
		}
	}
	return out
}
