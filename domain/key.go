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
	// MultiplexProfiles puts the active profile in the namespace.
	MultiplexProfiles bool
	// Profile is the active profile name, used when MultiplexProfiles is on.
	Profile string
	// WhatsAppAliases is the alias graph used to canonicalise WhatsApp ids.
	WhatsAppAliases WhatsAppAliases
}

// DefaultKeyOptions are Hermes' defaults.
func DefaultKeyOptions() KeyOptions {
	return KeyOptions{GroupSessionsPerUser: true}
}

// BuildSessionKey returns the lane key of a source:
// agent:<ns>:<platform>:<chat_type>[:<chat_id>][:<thread_id>][:<participant>],
// exactly as Hermes builds it (nothing is escaped; DMs never carry the user
// when a chat id exists; WhatsApp ids are canonicalised).
func BuildSessionKey(src SessionSource, o KeyOptions) string {
	src = src.Normalized()
	parts := []string{"agent", o.namespace(), src.Platform}
	whatsapp := src.Platform == PlatformWhatsApp
	participant := firstNonEmpty(src.UserIDAlt, src.UserID)
	if whatsapp && participant != "" {
		participant = firstNonEmpty(o.WhatsAppAliases.Canonical(participant), participant)
	}

	if src.ChatType == ChatDM {
		parts = append(parts, ChatDM)
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

	parts = append(parts, src.ChatType)
	if src.ChatID != "" {
		parts = append(parts, src.ChatID)
	}
	if src.ThreadID != "" {
		parts = append(parts, src.ThreadID)
	}
	isolate := o.GroupSessionsPerUser
	if src.ThreadID != "" && !o.ThreadSessionsPerUser {
		isolate = false
	}
	if isolate && participant != "" {
		parts = append(parts, participant)
	}
	return strings.Join(parts, ":")
}

func (o KeyOptions) namespace() string {
	if !o.MultiplexProfiles || o.Profile == "" || o.Profile == "default" {
		return "main"
	}
	return o.Profile
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
