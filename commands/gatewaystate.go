package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"hermes/domain"
	"hermes/events"
)

// Bounds of state_meta (set_meta).
const (
	MaxMetaKey   = 512
	MaxMetaValue = 256 << 10
	// reservedMetaPrefix starts the state_meta keys hermes' own read model
	// writes (its checkpoint, its name): no client may set them.
	reservedMetaPrefix = "hermes_"
)

// StateIndex is what the state commands read from the read models: does a
// session exist, its handoff state, its Telegram topic binding. The caller
// makes it current (read your writes).
type StateIndex interface {
	SessionExists(ctx context.Context, sessionID string) (bool, error)
	// HandoffState returns the session's handoff_state ("" when none)
	// and whether the session exists.
	HandoffState(ctx context.Context, sessionID string) (state string, exists bool, err error)
	// TopicBindingOfSession returns the session's topic binding, or nil.
	TopicBindingOfSession(ctx context.Context, sessionID string) (*domain.TopicBinding, error)
}

// StateCommands append the SessionDB state a gateway keeps beside its
// transcripts: state_meta values, handoffs and Telegram's topic mode.
type StateCommands struct {
	h     *Handler
	index StateIndex
	// handoffs serialises the handoff commands, so a claim's check of the
	// state and its append cannot interleave with another claim's.
	handoffs sync.Mutex
	// topics serialises the bindings, so the check that a session is bound
	// to one topic at most and the append cannot interleave.
	topics sync.Mutex
}

// State returns the state commands over index.
func (h *Handler) State(index StateIndex) *StateCommands { return &StateCommands{h: h, index: index} }

// appendTo appends es to stream at expected.
func (s *StateCommands) appendTo(ctx context.Context, stream string, expected events.ExpectedVersion, command, commandID string, es ...events.Event) (events.AppendResult, error) {
	cmd := identify(commandID)
	res, err := s.h.store.Append(ctx, stream, expected, s.h.proposals(command, cmd, stream, es))
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("%s %s: %w", command, stream, err)
	}
	return res, nil
}

// CheckMetaKey accepts a state_meta key: 1 to MaxMetaKey bytes of valid
// UTF-8 without NUL, not one of hermes' own (hermes_…).
func CheckMetaKey(key string) error {
	switch {
	case key == "" || len(key) > MaxMetaKey:
		return fmt.Errorf("%w: meta key must be 1 to %d bytes", domain.ErrInvalidArgument, MaxMetaKey)
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return fmt.Errorf("%w: meta key must be valid UTF-8 without NUL", domain.ErrInvalidArgument)
	case strings.HasPrefix(key, reservedMetaPrefix):
		return fmt.Errorf("%w: meta keys starting %q are hermes' own", domain.ErrInvalidArgument, reservedMetaPrefix)
	}
	return nil
}

// MetaSessionOf is the session a state_meta key is about: the part after
// its last ':' when that is a valid session id ("goal:<session id>"), else
// "".
func MetaSessionOf(key string) string {
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return ""
	}
	if id := key[i+1:]; domain.ValidateSessionID(id) == nil {
		return id
	}
	return ""
}

// SetMeta is set_meta(Key, Value).
type SetMeta struct {
	Key, Value string
	CommandID  string
}

// SetMeta records the value: on the transcript stream of the session the
// key is about when that session exists (so it is erased with it), else on
// the meta stream. It returns the event's position.
func (s *StateCommands) SetMeta(ctx context.Context, c SetMeta) (uint64, error) {
	if err := CheckMetaKey(c.Key); err != nil {
		return 0, err
	}
	if len(c.Value) > MaxMetaValue || !utf8.ValidString(c.Value) || strings.ContainsRune(c.Value, 0) {
		return 0, fmt.Errorf("%w: meta value must be valid UTF-8 without NUL, at most %d bytes", domain.ErrInvalidArgument, MaxMetaValue)
	}
	now := s.h.now()
	if id := MetaSessionOf(c.Key); id != "" {
		exists, err := s.index.SessionExists(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("set meta %q: %w", c.Key, err)
		}
		if exists {
			res, err := s.appendTo(ctx, events.TranscriptStream(id), events.AnyVersion(), "set_meta", c.CommandID,
				events.SessionMetaSet{SessionID: id, Key: c.Key, Value: c.Value, At: now})
			return res.LastPosition(), err
		}
	}
	res, err := s.appendTo(ctx, events.MetaStream, events.AnyVersion(), "set_meta", c.CommandID,
		events.MetaSet{Key: c.Key, Value: c.Value, At: now})
	return res.LastPosition(), err
}

// Handoff names a session for the handoff commands.
type Handoff struct {
	SessionID string
	// Platform (RequestHandoff) and Error (FailHandoff).
	Platform, Error string
	CommandID       string
}

// HandoffOutcome is a handoff command's result: Changed is Hermes' True
// (requested, claimed); Position the event's (0: none).
type HandoffOutcome struct {
	Changed  bool
	Position uint64
}

// handoff runs decide on the session's handoff state and appends what it
// decided, under the handoff lock.
func (s *StateCommands) handoff(ctx context.Context, c Handoff, command string, decide func(domain.Handoff) ([]events.Event, error)) (HandoffOutcome, error) {
	if err := domain.ValidateSessionID(c.SessionID); err != nil {
		return HandoffOutcome{}, err
	}
	s.handoffs.Lock()
	defer s.handoffs.Unlock()
	state, exists, err := s.index.HandoffState(ctx, c.SessionID)
	if err != nil {
		return HandoffOutcome{}, fmt.Errorf("%s %s: %w", command, c.SessionID, err)
	}
	if !exists {
		return HandoffOutcome{}, fmt.Errorf("%s: %w: %s", command, ErrSessionNotFound, c.SessionID)
	}
	decided, err := decide(domain.Handoff{State: state})
	if err != nil || len(decided) == 0 {
		return HandoffOutcome{}, err
	}
	res, err := s.appendTo(ctx, events.TranscriptStream(c.SessionID), events.AnyVersion(), command, c.CommandID, decided...)
	if err != nil {
		return HandoffOutcome{}, err
	}
	return HandoffOutcome{Changed: true, Position: res.LastPosition()}, nil
}

// RequestHandoff is request_handoff: pending unless one is in flight.
func (s *StateCommands) RequestHandoff(ctx context.Context, c Handoff) (HandoffOutcome, error) {
	return s.handoff(ctx, c, "request_handoff", func(h domain.Handoff) ([]events.Event, error) {
		return h.RequestHandoff(c.SessionID, c.Platform, s.h.now())
	})
}

// ClaimHandoff is claim_handoff: pending becomes running, once.
func (s *StateCommands) ClaimHandoff(ctx context.Context, c Handoff) (HandoffOutcome, error) {
	return s.handoff(ctx, c, "claim_handoff", func(h domain.Handoff) ([]events.Event, error) {
		return h.ClaimHandoff(c.SessionID, s.h.now()), nil
	})
}

// CompleteHandoff is complete_handoff.
func (s *StateCommands) CompleteHandoff(ctx context.Context, c Handoff) (HandoffOutcome, error) {
	return s.handoff(ctx, c, "complete_handoff", func(h domain.Handoff) ([]events.Event, error) {
		return h.CompleteHandoff(c.SessionID, s.h.now()), nil
	})
}

// FailHandoff is fail_handoff with its reason.
func (s *StateCommands) FailHandoff(ctx context.Context, c Handoff) (HandoffOutcome, error) {
	return s.handoff(ctx, c, "fail_handoff", func(h domain.Handoff) ([]events.Event, error) {
		return h.FailHandoff(c.SessionID, c.Error, s.h.now())
	})
}

// maxTopicEvents bounds the fold of a chat's topic stream.
const maxTopicEvents = 1 << 16

// topicChat folds a chat's topic stream and returns its version.
func (s *StateCommands) topicChat(ctx context.Context, chatID string) (domain.TopicChat, uint64, error) {
	var c domain.TopicChat
	envs, err := s.h.store.ReadStream(ctx, events.TelegramStream(chatID), 1, maxTopicEvents, events.Forwards)
	if isNotFound(err) {
		return c, 0, nil
	}
	if err != nil {
		return c, 0, fmt.Errorf("read topics of chat %s: %w", chatID, err)
	}
	var version uint64
	for _, env := range envs {
		c, version = c.Evolve(env.Event), env.Version
	}
	return c, version, nil
}

// onChat decides on a chat's topic stream and appends at the version read,
// retrying when another append came first.
func (s *StateCommands) onChat(ctx context.Context, chatID, command, commandID string, decide func(domain.TopicChat) ([]events.Event, error)) (uint64, error) {
	if err := checkChatID(chatID); err != nil {
		return 0, err
	}
	for range maxAttempts {
		c, version, err := s.topicChat(ctx, chatID)
		if err != nil {
			return 0, err
		}
		decided, err := decide(c)
		if err != nil || len(decided) == 0 {
			return 0, err
		}
		res, err := s.appendTo(ctx, events.TelegramStream(chatID), events.ExactVersion(version), command, commandID, decided...)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return res.LastPosition(), nil
	}
	return 0, fmt.Errorf("%s chat %s: %w", command, chatID, ErrConflict)
}

// checkChatID keeps a chat id usable in a stream name.
func checkChatID(id string) error {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) || strings.ContainsAny(id, "\x00/") {
		return fmt.Errorf("%w: chat_id must be 1 to 256 bytes of UTF-8 without NUL or '/'", domain.ErrInvalidArgument)
	}
	return nil
}

// EnableTopicMode is enable_telegram_topic_mode.
type EnableTopicMode struct {
	Mode      domain.TopicMode
	CommandID string
}

// EnableTopicMode records that topic mode is on for the chat.
func (s *StateCommands) EnableTopicMode(ctx context.Context, c EnableTopicMode) (uint64, error) {
	return s.onChat(ctx, c.Mode.ChatID, "enable_topic_mode", c.CommandID, func(chat domain.TopicChat) ([]events.Event, error) {
		return chat.EnableTopicMode(c.Mode, s.h.now())
	})
}

// DisableTopicMode is disable_telegram_topic_mode.
type DisableTopicMode struct {
	ChatID        string
	ClearBindings bool
	CommandID     string
}

// DisableTopicMode records that topic mode is off for the chat (and its
// bindings dropped with ClearBindings); a chat that never had it changes
// nothing.
func (s *StateCommands) DisableTopicMode(ctx context.Context, c DisableTopicMode) (uint64, error) {
	return s.onChat(ctx, c.ChatID, "disable_topic_mode", c.CommandID, func(chat domain.TopicChat) ([]events.Event, error) {
		return chat.DisableTopicMode(c.ChatID, c.ClearBindings, s.h.now())
	})
}

// BindTopic is bind_telegram_topic.
type BindTopic struct {
	Binding   events.TopicBound
	CommandID string
}

// BindTopic binds the topic to the session, refused with
// domain.ErrTopicTaken when the session is bound to another topic, and
// with ErrSessionNotFound when the session does not exist.
func (s *StateCommands) BindTopic(ctx context.Context, c BindTopic) (uint64, error) {
	b := c.Binding
	if err := domain.ValidateSessionID(b.SessionID); err != nil {
		return 0, err
	}
	s.topics.Lock()
	defer s.topics.Unlock()
	exists, err := s.index.SessionExists(ctx, b.SessionID)
	if err != nil {
		return 0, fmt.Errorf("bind topic: %w", err)
	}
	if !exists {
		return 0, fmt.Errorf("bind topic: %w: %s", ErrSessionNotFound, b.SessionID)
	}
	current, err := s.index.TopicBindingOfSession(ctx, b.SessionID)
	if err != nil {
		return 0, fmt.Errorf("bind topic: %w", err)
	}
	return s.onChat(ctx, b.ChatID, "bind_topic", c.CommandID, func(chat domain.TopicChat) ([]events.Event, error) {
		return chat.BindTopic(b, current, s.h.now())
	})
}
