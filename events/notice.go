package events

import "time"

// TypeNoticeDelivered is the persisted type name of [NoticeDelivered]. Never
// change it: a new shape is a new name plus an upcaster in codec.go.
const TypeNoticeDelivered = "lane.notice_delivered.v1"

// NoticeDelivered records that the auto-reset notice of the lane's session
// (the user notice, when one was due, and the agent's context note) was
// delivered. It consumes the pending notice exactly once: after it the
// notice is neither repeated (after a crash or a restart) nor pending any
// more. SessionID is the session whose reset notice was delivered; Reason is
// the auto-reset reason it explained (idle, daily, suspended,
// resume_pending_expired).
type NoticeDelivered struct {
	SessionID string    `json:"session_id"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

func (e NoticeDelivered) EventType() string     { return TypeNoticeDelivered }
func (e NoticeDelivered) OccurredAt() time.Time { return e.At }
func (NoticeDelivered) isEvent()                {}
