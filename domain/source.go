package domain

import "hermes/events"

// Chat types of a SessionSource.
const (
	ChatDM      = "dm"
	ChatGroup   = "group"
	ChatChannel = "channel"
	ChatThread  = "thread"
)

// PlatformLocal is the platform of the machine running the agent (the CLI).
const PlatformLocal = "local"

// SessionSource describes where a message came from (Hermes' SessionSource,
// with its 15 fields and JSON names). It shares the underlying struct of
// events.Source, so converting between the two is exact and free.
type SessionSource events.Source

// Normalized returns the source with the defaults Hermes applies: chat_type
// "dm" when empty. (The scope needs no reconciling: scope_id and its alias
// guild_id are one field, GuildID.)
func (s SessionSource) Normalized() SessionSource {
	if s.ChatType == "" {
		s.ChatType = ChatDM
	}
	return s
}

// Description is the human-readable summary of the source used in the
// session context prompt, e.g. "DM with Alice" or "group: My Group, thread: 7".
func (s SessionSource) Description() string {
	if s.Platform == PlatformLocal {
		return "CLI terminal"
	}
	var d string
	switch s.Normalized().ChatType {
	case ChatDM:
		d = "DM with " + firstNonEmpty(s.UserName, s.UserID, "user")
	case ChatGroup:
		d = "group: " + firstNonEmpty(s.ChatName, s.ChatID)
	case ChatChannel:
		d = "channel: " + firstNonEmpty(s.ChatName, s.ChatID)
	default:
		d = firstNonEmpty(s.ChatName, s.ChatID)
	}
	if s.ThreadID != "" {
		d += ", thread: " + s.ThreadID
	}
	return d
}

// Event returns the stored shape of the source.
func (s SessionSource) Event() events.Source { return events.Source(s) }

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
