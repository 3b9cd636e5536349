package domain

import (
	"errors"

	"hermes/events"
)

// Refusals of the decide methods, tested with errors.Is.
var (
	// ErrLaneNotFound: the command needs an existing lane entry.
	ErrLaneNotFound = errors.New("session lane not found")
	// ErrSuspended: the lane is suspended, so it cannot be marked for resume.
	ErrSuspended = errors.New("session lane is suspended")
	// ErrInvalidSessionID: a session id that is malformed or unsafe as a
	// file or path component.
	ErrInvalidSessionID = errors.New("invalid session id")
	// ErrInvalidArgument: a command argument out of its range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidPolicy: a reset policy the rules cannot evaluate.
	ErrInvalidPolicy = errors.New("invalid reset policy")
)

// Auto-reset reasons (see events).
const (
	AutoResetIdle                 = events.AutoResetIdle
	AutoResetDaily                = events.AutoResetDaily
	AutoResetSuspended            = events.AutoResetSuspended
	AutoResetResumePendingExpired = events.AutoResetResumePendingExpired
)
