package domain

import (
	"errors"
	"fmt"
	"time"

	"hermes/events"
)

// ErrTopicTaken: the session is already bound to another Telegram topic
// (Hermes raises ValueError: a session is linked to one topic at most).
var ErrTopicTaken = errors.New("session is already linked to another Telegram topic")

// TopicBinding is a Telegram DM topic bound to a session, as the read model
// holds it.
type TopicBinding struct {
	ChatID, ThreadID string
}

// TopicChat is what a chat's topic stream says: whether topic mode was
// ever enabled and whether it is on.
type TopicChat struct {
	Enabled, EverEnabled bool
	// Bound: a topic of the chat was ever bound.
	Bound bool
}

// Evolve folds one event of a chat's topic stream.
func (c TopicChat) Evolve(e events.Event) TopicChat {
	switch e.(type) {
	case events.TopicModeEnabled:
		c.Enabled, c.EverEnabled = true, true
	case events.TopicModeDisabled:
		c.Enabled = false
	case events.TopicBound:
		c.Bound = true
	}
	return c
}

// TopicMode is an enable_telegram_topic_mode request.
type TopicMode struct {
	ChatID, UserID                              string
	HasTopicsEnabled, AllowsUsersToCreateTopics *bool
}

// EnableTopicMode decides enable_telegram_topic_mode: always recorded (it
// refreshes the user and the capabilities the bot saw).
func (c TopicChat) EnableTopicMode(m TopicMode, now time.Time) ([]events.Event, error) {
	if err := checkShortText("chat_id", m.ChatID); err != nil {
		return nil, err
	}
	if err := checkShortText("user_id", m.UserID); err != nil {
		return nil, err
	}
	return []events.Event{events.TopicModeEnabled{ChatID: m.ChatID, UserID: m.UserID, HasTopicsEnabled: m.HasTopicsEnabled,
		AllowsUsersToCreateTopics: m.AllowsUsersToCreateTopics, At: now}}, nil
}

// DisableTopicMode decides disable_telegram_topic_mode: a chat that never
// had topic mode or a binding changes nothing (Hermes: no tables, no-op).
func (c TopicChat) DisableTopicMode(chatID string, clearBindings bool, now time.Time) ([]events.Event, error) {
	if err := checkShortText("chat_id", chatID); err != nil {
		return nil, err
	}
	if !c.EverEnabled && !c.Bound {
		return nil, nil
	}
	return []events.Event{events.TopicModeDisabled{ChatID: chatID, ClearBindings: clearBindings, At: now}}, nil
}

// BindTopic decides bind_telegram_topic. current is the session's binding
// (nil: none): binding it again to the same topic refreshes it, binding it
// to another topic is refused with ErrTopicTaken. A topic bound to another
// session is taken over (Hermes' upsert).
func (c TopicChat) BindTopic(b events.TopicBound, current *TopicBinding, now time.Time) ([]events.Event, error) {
	for _, f := range []struct{ name, v string }{{"chat_id", b.ChatID}, {"thread_id", b.ThreadID}, {"user_id", b.UserID},
		{"session_key", b.SessionKey}, {"managed_mode", b.ManagedMode}} {
		if err := checkShortText(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if err := ValidateSessionID(b.SessionID); err != nil {
		return nil, err
	}
	if current != nil && (current.ChatID != b.ChatID || current.ThreadID != b.ThreadID) {
		return nil, fmt.Errorf("%w: %s is bound to topic %s of chat %s", ErrTopicTaken, b.SessionID, current.ThreadID, current.ChatID)
	}
	b.At = now
	return []events.Event{b}, nil
}
