package domain

import "strings"

// PlatformWhatsApp is the platform whose identifiers are canonicalised in keys.
const PlatformWhatsApp = "whatsapp"

// KeyOptions are the configuration that shapes session keys.
type KeyOptions struct {
	// GroupSessionsPerUser isolates group and channel lanes per participant
	// (Hermes default true).
	GroupSessionsPerUser bool
	// ThreadSessionsPerUser isolates thread lanes per participant (default
	// false: a thread is shared). It cannot switch isolation on when
	// GroupSessionsPerUser is false.
	ThreadSessionsPerUser bool
	// MultiplexProfiles puts the profile in the namespace: the source's
	// when it names one, else the active profile.
	MultiplexProfiles bool
	// Profile is the active profile name, used when MultiplexProfiles is on
	// and the source names none.
	Profile string
	// WhatsAppAliases is the alias graph used to canonicalise WhatsApp ids.
	WhatsAppAliases WhatsAppAliases
}

// DefaultKeyOptions are Hermes' defaults.
func DefaultKeyOptions() KeyOptions {
	return KeyOptions{GroupSessionsPerUser: true}
}

// BuildSessionKey returns the lane key of a source:
// agent:<ns>:<platform>:<chat_type>[:<scope>][:<chat_id>][:<thread_id>][:<participant>],
// exactly as Hermes builds it at d7f5acb9 (nothing is escaped; DMs never
// carry the user when a chat id exists; WhatsApp ids are canonicalised).
// Of the fields newer Hermes added to the source, three move the key, as
// there: the scope (scope_id, alias guild_id) only on Slack, where it is the
// workspace (Discord's guild stays out, so its keys do not change); the
// profile only when profiles are multiplexed; and a prospective thread id,
// which keys a channel message on the thread it will be answered in (the
// chat type slot becoming "thread"), so the thread's follow-ups, which
// carry it as their thread id, continue the same lane. The auto-thread
// name and flag do not.
func BuildSessionKey(src SessionSource, o KeyOptions) string {
	src = src.Normalized()
	parts := []string{"agent", o.namespace(src.Profile), src.Platform}
	var scope string
	if src.Platform == PlatformSlack {
		scope = src.GuildID
	}
	whatsapp := src.Platform == PlatformWhatsApp
	participant := firstNonEmpty(src.UserIDAlt, src.UserID)
	if whatsapp && participant != "" {
		participant = firstNonEmpty(o.WhatsAppAliases.Canonical(participant), participant)
	}

	if src.ChatType == ChatDM {
		parts = append(parts, ChatDM)
		if scope != "" {
			parts = append(parts, scope)
		}
		chatID := src.ChatID
		if whatsapp {
			chatID = o.WhatsAppAliases.Canonical(chatID)
		}
		switch {
		case chatID != "":
			parts = append(parts, chatID)
		case participant != "":
			parts = append(parts, participant)
		}
		if src.ThreadID != "" {
			parts = append(parts, src.ThreadID)
		}
		return strings.Join(parts, ":")
	}

	thread, chatType := src.ThreadID, src.ChatType
	if thread == "" && src.ProspectiveThreadID != "" {
		thread, chatType = src.ProspectiveThreadID, ChatThread
	}
	parts = append(parts, chatType)
	if scope != "" {
		parts = append(parts, scope)
	}
	if src.ChatID != "" {
		parts = append(parts, src.ChatID)
	}
	if thread != "" {
		parts = append(parts, thread)
	}
	isolate := o.GroupSessionsPerUser
	if thread != "" && !o.ThreadSessionsPerUser {
		isolate = false
	}
	if isolate && participant != "" {
		parts = append(parts, participant)
	}
	return strings.Join(parts, ":")
}

// namespace is the key's second part: "main", or the profile when profiles
// are multiplexed (the source's, else the active one; "default" is "main").
func (o KeyOptions) namespace(sourceProfile string) string {
	if !o.MultiplexProfiles {
		return "main"
	}
	p := firstNonEmpty(sourceProfile, o.Profile)
	if p == "" || p == "default" {
		return "main"
	}
	return p
}

// IsSharedMultiUserSession reports whether several users share the source's
// lane (so the prompt names no single user and messages carry a sender
// prefix). Note Hermes' quirk, kept: with GroupSessionsPerUser false and
// ThreadSessionsPerUser true a thread has a shared key yet is reported as
// not shared.
func IsSharedMultiUserSession(src SessionSource, o KeyOptions) bool {
	src = src.Normalized()
	if src.ChatType == ChatDM {
		return false
	}
	if src.ThreadID != "" {
		return !o.ThreadSessionsPerUser
	}
	return !o.GroupSessionsPerUser
}
