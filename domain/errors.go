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
	// ErrTurnBusy: a turn is open on the lane and another one was asked
	// to start. Only the open turn's end (its completion, or its
	// interruption when its run ends) frees the lane; the caller queues
	// the message, as Hermes' busy rule does.
	ErrTurnBusy = errors.New("a turn is open on the lane")
	// ErrTurnNotOpen: a write fenced by a turn (a completion or a message
	// naming its turn id) for a turn that is not the lane's open turn: it
	// ended, was interrupted (its node's run was adopted) or never began.
	ErrTurnNotOpen = errors.New("the turn is not the lane's open turn")
)

// Auto-reset reasons (see events).
const (
	AutoResetIdle                 = events.AutoResetIdle
	AutoResetDaily                = events.AutoResetDaily
	AutoResetSuspended            = events.AutoResetSuspended
	AutoResetResumePendingExpired = events.AutoResetResumePendingExpired
)
