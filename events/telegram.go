package events

import "time"

// Persisted type names of Telegram's DM topic mode (Hermes'
// enable_telegram_topic_mode, disable_telegram_topic_mode,
// bind_telegram_topic), one stream per private chat: telegram-<chat id>.
const (
	TypeTopicModeEnabled  = "telegram.topic_mode_enabled.v1"
	TypeTopicModeDisabled = "telegram.topic_mode_disabled.v1"
	TypeTopicBound        = "telegram.topic_bound.v1"
	TypeTopicsErased      = "telegram.person_erased.v1"
)

// TelegramPrefix starts the name of a Telegram chat's topic stream.
const TelegramPrefix = "telegram-"

// TelegramStream is the topic stream of a Telegram chat.
func TelegramStream(chatID string) string { return TelegramPrefix + chatID }

// TopicModeEnabled records that topic mode was turned on for a private
// chat with UserID, with the capabilities the bot saw (nil: unknown).
type TopicModeEnabled struct {
	ChatID                    string    `json:"chat_id"`
	UserID                    string    `json:"user_id"`
	HasTopicsEnabled          *bool     `json:"has_topics_enabled,omitempty"`
	AllowsUsersToCreateTopics *bool     `json:"allows_users_to_create_topics,omitempty"`
	At                        time.Time `json:"at"`
}

// TopicModeDisabled records that topic mode was turned off for a chat;
// ClearBindings: its topic bindings were dropped too.
type TopicModeDisabled struct {
	ChatID        string    `json:"chat_id"`
	ClearBindings bool      `json:"clear_bindings"`
	At            time.Time `json:"at"`
}

// TopicBound records that the chat's topic ThreadID is bound to the
// session SessionID of lane SessionKey (replacing the topic's previous
// binding, if any). A session is bound to at most one topic.
type TopicBound struct {
	ChatID      string    `json:"chat_id"`
	ThreadID    string    `json:"thread_id"`
	UserID      string    `json:"user_id"`
	SessionKey  string    `json:"session_key"`
	SessionID   string    `json:"session_id"`
	ManagedMode string    `json:"managed_mode"`
	At          time.Time `json:"at"`
}

// TopicsErased records that a person erasure (ErasureID) forgot the user of
// a chat's topic stream: the user id of every earlier event of the stream
// is erased (the chat and thread ids, which route, stay; docs/ERASURE.md).
type TopicsErased struct {
	ChatID      string    `json:"chat_id"`
	ErasureID   string    `json:"erasure_id"`
	Reason      string    `json:"reason"`
	RequestedBy string    `json:"requested_by,omitempty"`
	At          time.Time `json:"at"`
}

// Erase implements [Erasure].
func (x TopicsErased) Erase(earlier Event) (Event, bool) {
	switch e := earlier.(type) {
	case TopicModeEnabled:
		changed := e.UserID != ""
		e.UserID = ""
		return e, changed
	case TopicBound:
		changed := e.UserID != ""
		e.UserID = ""
		return e, changed
	}
	return earlier, false
}

func (e TopicsErased) EventType() string     { return TypeTopicsErased }
func (e TopicsErased) OccurredAt() time.Time { return e.At }
func (TopicsErased) isEvent()                {}

func (e TopicModeEnabled) EventType() string  { return TypeTopicModeEnabled }
func (e TopicModeDisabled) EventType() string { return TypeTopicModeDisabled }
func (e TopicBound) EventType() string        { return TypeTopicBound }

func (e TopicModeEnabled) OccurredAt() time.Time  { return e.At }
func (e TopicModeDisabled) OccurredAt() time.Time { return e.At }
func (e TopicBound) OccurredAt() time.Time        { return e.At }

func (TopicModeEnabled) isEvent()  {}
func (TopicModeDisabled) isEvent() {}
func (TopicBound) isEvent()        {}
