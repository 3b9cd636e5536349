package commands

import (
	"context"
	"time"

	"hermes/domain"
	"hermes/events"
)

// PendingResetNotice returns the auto-reset notice lane l has not yet
// delivered, judged with the reset policy configured for its platform and
// chat type (see [domain.Lane.PendingResetNotice]).
func (h *Handler) PendingResetNotice(l domain.Lane) (domain.ResetNotice, bool) {
	return l.PendingResetNotice(h.cfg.Policies.For(l.Platform, l.ChatType))
}

// AcknowledgeNotice records that the lane's pending auto-reset notice (and
// its context note) was delivered, so that it is delivered exactly once:
// neither repeated nor lost across a crash or a restart.
type AcknowledgeNotice struct {
	Key string
	// SessionID, when set, acknowledges only the notice of that session:
	// when the lane has moved on to a newer session (another reset
	// happened since the notice was read), the newer notice stays pending.
	// Empty acknowledges whatever is pending.
	SessionID string
	CommandID string
}

// AcknowledgeNotice consumes a lane's pending notice. It is idempotent:
// with nothing pending it appends nothing, and a retried CommandID is
// applied once. A missing lane is refused with domain.ErrLaneNotFound.
func (h *Handler) AcknowledgeNotice(ctx context.Context, c AcknowledgeNotice) (LaneResult, error) {
	return h.execute(ctx, c.Key, "acknowledge_notice", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.AcknowledgeNotice(c.SessionID, now)
	})
}
