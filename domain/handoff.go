package domain

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"hermes/events"
)

// MaxHandoffError is how much of a handoff's failure reason is kept, in
// characters (Hermes stores error[:500]).
const MaxHandoffError = 500

// Handoff is a session's handoff as the read model holds it (Hermes'
// sessions.handoff_state; "" when none was ever requested).
type Handoff struct {
	State string
}

// inFlight reports whether a handoff is pending or running.
func (h Handoff) inFlight() bool {
	return h.State == events.HandoffStatePending || h.State == events.HandoffStateRunning
}

// RequestHandoff decides request_handoff: a session with no handoff in
// flight becomes pending for platform; one in flight changes nothing
// (Hermes answers False).
func (h Handoff) RequestHandoff(sessionID, platform string, now time.Time) ([]events.Event, error) {
	if err := checkShortText("platform", platform); err != nil {
		return nil, err
	}
	if h.inFlight() {
		return nil, nil
	}
	return []events.Event{events.HandoffRequested{SessionID: sessionID, Platform: platform, At: now}}, nil
}

// ClaimHandoff decides claim_handoff: pending becomes running, once; any
// other state changes nothing (Hermes answers False).
func (h Handoff) ClaimHandoff(sessionID string, now time.Time) []events.Event {
	if h.State != events.HandoffStatePending {
		return nil
	}
	return []events.Event{events.HandoffClaimed{SessionID: sessionID, At: now}}
}

// CompleteHandoff decides complete_handoff, whatever the state (as Hermes'
// UPDATE does).
func (h Handoff) CompleteHandoff(sessionID string, now time.Time) []events.Event {
	return []events.Event{events.HandoffCompleted{SessionID: sessionID, At: now}}
}

// FailHandoff decides fail_handoff with its reason, cut to
// MaxHandoffError characters, whatever the state.
func (h Handoff) FailHandoff(sessionID, reason string, now time.Time) ([]events.Event, error) {
	if !utf8.ValidString(reason) {
		return nil, fmt.Errorf("%w: error is not valid UTF-8", ErrInvalidArgument)
	}
	if utf8.RuneCountInString(reason) > MaxHandoffError {
		reason = string([]rune(reason)[:MaxHandoffError])
	}
	return []events.Event{events.HandoffFailed{SessionID: sessionID, Error: reason, At: now}}, nil
}

// maxShortText bounds the short names the gateway commands store (a
// platform, a managed mode): as the source fields.
const maxShortText = 1024

// checkShortText accepts non-empty valid UTF-8 of at most maxShortText
// bytes without NUL.
func checkShortText(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
	case len(s) > maxShortText:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidArgument, field, maxShortText)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: %s has a NUL byte", ErrInvalidArgument, field)
	}
	return nil
}
