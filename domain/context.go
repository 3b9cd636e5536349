package domain

import (
	"slices"
	"strings"
	"unicode"
)

// Platforms with their own lines in the session context prompt.
const (
	PlatformMatrix      = "matrix"
	PlatformSlack       = "slack"
	PlatformDiscord     = "discord"
	PlatformBlueBubbles = "bluebubbles"
	PlatformYuanbao     = "yuanbao"
)

// HomeChannel is a platform's home channel (platforms.<name>.home_channel):
// the default destination of scheduled task output on that platform.
type HomeChannel struct {
	ChatID string
	// Name is shown as is; empty renders as "Home", the default name of
	// Hermes' HomeChannel.
	Name string
}

// ContextSettings are the configured inputs of the session context prompt
// besides the message source.
type ContextSettings struct {
	// ConnectedPlatforms are the platforms that are enabled and configured
	// (platforms.<name>). They are listed sorted by name, as Hermes'
	// get_connected_platforms does to keep the prompt byte-stable; "local"
	// is always listed first and never repeated.
	ConnectedPlatforms []string
	// HomeChannels maps a platform to its home channel. Only connected
	// platforms' home channels are shown, in the order of the connected
	// platforms.
	HomeChannels map[string]HomeChannel
	// HermesHome is the hermes home directory as shown to the agent (e.g.
	// "~/.hermes"): local delivery writes to <HermesHome>/cron/output/.
	HermesHome string
	// RedactPII is privacy.redact_pii. It applies only on PII-safe
	// platforms (see [PIISafePlatform] and PIISafePlatforms).
	RedactPII bool
	// PIISafePlatforms are further (plugin) platforms registered as
	// pii_safe. Discord can never be made PII-safe.
	PIISafePlatforms []string
	// DiscordToolsLoaded: the agent has the discord/discord_admin tools this
	// session, so a Discord prompt lists the ids they need instead of the
	// "no Discord APIs" disclaimer.
	DiscordToolsLoaded bool
}

// Redacts reports whether ids are redacted in the prompt of a source on
// platform: privacy.redact_pii is on and the platform is PII-safe.
func (s ContextSettings) Redacts(platform string) bool {
	if !s.RedactPII || platform == PlatformDiscord {
		return false
	}
	return PIISafePlatform(platform) || slices.Contains(s.PIISafePlatforms, platform)
}

// Exact texts of the session context prompt (Hermes' Era B
// build_session_context_prompt). The catalogue (§1.6) only outlines the
// Matrix block, the platform notes, the home channels, the delivery options
// and the closing line; their wording here is the one Hermes' Era B source
// renders, character for character.
const (
	contextHeading          = "## Current Session Context"
	localSource             = "**Source:** Local (the machine running this agent)"
	matrixBoundary          = "**Matrix room boundary:** Treat this turn as scoped to the current Matrix room/thread only. Do not assume unresolved references are about other Matrix rooms or projects unless the user explicitly says so."
	multiUserSuffix         = " — messages are prefixed with [sender name]. Multiple users may participate."
	slackNotes              = "**Platform notes:** You are running inside Slack. You do NOT have access to Slack-specific APIs — you cannot search channel history, pin/unpin messages, manage channels, or list users. Do not promise to perform these actions. The gateway may inline the current message's Slack block/attachment payload when available, but you still cannot call Slack APIs yourself."
	discordNotes            = "**Platform notes:** You are running inside Discord. You do NOT have access to Discord-specific APIs — you cannot search channel history, pin messages, manage roles, or list server members. Do not promise to perform these actions. If the user asks, explain that you can only read messages sent directly to you and respond."
	discordIDsHeading       = "**Discord IDs (for the `discord` / `discord_admin` tools):**"
	blueBubblesNotes        = "**Platform notes:** You are responding via iMessage. Keep responses short and conversational — think texts, not essays. Structure longer replies as separate short thoughts, each separated by a blank line (double newline). Each block between blank lines will be delivered as its own iMessage bubble, so write accordingly: one idea per bubble, 1–3 sentences each. If the user needs a detailed answer, give the short version first and offer to elaborate."
	yuanbaoNotes            = "**Platform notes:** You are running inside Yuanbao. To send a private (DM) message to a user in the current group, use the yb_send_dm tool (look up the recipient by name or pass their user_id). Your normal reply is delivered to the group you are responding in."
	localPlatformListed     = "local (files on this machine)"
	homeChannelsHeading     = "**Home Channels (default destinations):**"
	deliveryHeading         = "**Delivery options for scheduled tasks:**"
	localOriginDelivery     = "- `\"origin\"` → Local output (saved to files)"
	explicitTargetingFooter = "*For explicit targeting, use `\"platform:chat_id\"` format if the user provides a specific chat ID.*"
	defaultHomeChannelName  = "Home"
)

// SessionContextPrompt is the "## Current Session Context" section of the
// agent's system prompt for a message from src, exactly as Hermes' (Era B)
// build_session_context_prompt renders it: where the message came from, who
// is talking (or that several users share the session), platform notes,
// connected platforms, home channels and delivery options. When
// settings.Redacts the source's platform, user and chat ids are replaced by
// their hashes (see [RedactUserID], [RedactChatID]); names stay visible.
// The prompt does not change from one message to the next of the same
// lane, so it can be cached.
func SessionContextPrompt(src SessionSource, keys KeyOptions, settings ContextSettings) string {
	src = src.Normalized()
	redact := settings.Redacts(src.Platform)
	lines := []string{contextHeading, ""}

	if src.Platform == PlatformLocal {
		lines = append(lines, localSource)
	} else {
		desc := src.Description()
		if redact {
			desc = src.redactedDescription()
		}
		lines = append(lines, "**Source:** "+PlatformTitle(src.Platform)+" ("+desc+")")
	}

	if src.ChatTopic != "" {
		lines = append(lines, "**Channel Topic:** "+src.ChatTopic)
	}

	if src.Platform == PlatformMatrix {
		roomID, threadID := src.ChatID, src.ThreadID
		if redact {
			roomID, threadID = RedactChatID(roomID), RedactChatID(threadID)
		}
		lines = append(lines, "",
			"**Matrix Room:** "+firstNonEmpty(src.ChatName, src.ChatID),
			"**Matrix Room ID:** "+roomID)
		if src.ThreadID != "" {
			lines = append(lines, "**Matrix Thread:** "+threadID)
		}
		lines = append(lines, matrixBoundary)
	}

	switch {
	case IsSharedMultiUserSession(src, keys):
		label := "Multi-user session"
		if src.ThreadID != "" {
			label = "Multi-user thread"
		}
		lines = append(lines, "**Session type:** "+label+multiUserSuffix)
	case src.UserName != "":
		lines = append(lines, "**User:** "+src.UserName)
	case src.UserID != "":
		uid := src.UserID
		if redact {
			uid = RedactUserID(uid)
		}
		lines = append(lines, "**User ID:** "+uid)
	}

	lines = append(lines, platformNotes(src, settings.DiscordToolsLoaded)...)

	connected := settings.connected()
	listed := []string{localPlatformListed}
	for _, p := range connected {
		listed = append(listed, p+": Connected ✓")
	}
	lines = append(lines, "**Connected Platforms:** "+strings.Join(listed, ", "))

	var homes []string
	for _, p := range connected {
		if _, ok := settings.HomeChannels[p]; ok {
			homes = append(homes, p)
		}
	}
	if len(homes) > 0 {
		lines = append(lines, "", homeChannelsHeading)
		for _, p := range homes {
			home := settings.HomeChannels[p]
			id := home.ChatID
			if redact {
				id = RedactChatID(id)
			}
			lines = append(lines, "  - "+p+": "+home.name()+" (ID: "+id+")")
		}
	}

	lines = append(lines, "", deliveryHeading)
	if src.Platform == PlatformLocal {
		lines = append(lines, localOriginDelivery)
	} else {
		label := src.ChatName
		if label == "" {
			label = src.ChatID
			if redact {
				label = RedactChatID(label)
			}
		}
		lines = append(lines, "- `\"origin\"` → Back to this chat ("+label+")")
	}
	lines = append(lines, "- `\"local\"` → Save to local files only ("+settings.HermesHome+"/cron/output/)")
	for _, p := range homes {
		lines = append(lines, "- `\""+p+"\"` → Home channel ("+settings.HomeChannels[p].name()+")")
	}

	lines = append(lines, "", explicitTargetingFooter)
	return strings.Join(lines, "\n")
}

// redactedDescription is the Source description with no raw id: the user
// name, else the hashed user id, else "user"; the chat name, else the hashed
// chat id. Unlike [SessionSource.Description] it leaves out the thread.
func (s SessionSource) redactedDescription() string {
	user := s.UserName
	if user == "" {
		user = "user"
		if s.UserID != "" {
			user = RedactUserID(s.UserID)
		}
	}
	chat := s.ChatName
	if chat == "" {
		chat = RedactChatID(s.ChatID)
	}
	switch s.Normalized().ChatType {
	case ChatDM:
		return "DM with " + user
	case ChatGroup:
		return "group: " + chat
	case ChatChannel:
		return "channel: " + chat
	default:
		return chat
	}
}

// platformNotes are the lines some platforms add after the user line, each
// block preceded by a blank line.
func platformNotes(src SessionSource, discordTools bool) []string {
	switch src.Platform {
	case PlatformSlack:
		return []string{"", slackNotes}
	case PlatformDiscord:
		if !discordTools {
			return []string{"", discordNotes}
		}
		out := []string{"", discordIDsHeading}
		if src.GuildID != "" {
			out = append(out, "  - Guild: `"+src.GuildID+"`")
		}
		if src.ThreadID != "" && src.ParentChatID != "" {
			out = append(out,
				"  - Parent channel: `"+src.ParentChatID+"`",
				"  - Thread: `"+src.ThreadID+"` (use as `channel_id` for fetch_messages etc.)")
		} else {
			out = append(out, "  - Channel: `"+src.ChatID+"`")
		}
		if src.MessageID != "" {
			out = append(out, "  - Triggering message: `"+src.MessageID+"`")
		}
		return out
	case PlatformBlueBubbles:
		return []string{"", blueBubblesNotes}
	case PlatformYuanbao:
		return []string{"", yuanbaoNotes}
	}
	return nil
}

// connected returns the connected platforms sorted and de-duplicated,
// without local (always listed) and empty names. Hermes (Era B) listed them
// in config order; later versions sort them so the prompt stays
// byte-stable, which hermes does too (Go maps have no order to keep).
func (s ContextSettings) connected() []string {
	var out []string
	for _, p := range s.ConnectedPlatforms {
		if p != "" && p != PlatformLocal {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (h HomeChannel) name() string {
	// Hermes' HomeChannel defaults its name to "Home" (config without one).
	return firstNonEmpty(h.Name, defaultHomeChannelName)
}

// PlatformTitle is Python's str.title() of a platform name, as Hermes
// renders Platform.value.title(): "telegram" → "Telegram", "api_server" →
// "Api_Server". A letter is upper-cased after a character that is not a
// cased letter and lower-cased after one that is.
func PlatformTitle(platform string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range platform {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
	}
	return b.String()
}

// InboundText prepares the text of an incoming message as the agent
// receives it, as Hermes' gateway does: in a shared multi-user session the
// text is prefixed with the sender's name ("[Alice] hello"), when the sender
// has one; a back-fill block of recent channel messages (channelContext)
// then goes first, followed by a blank line and "[New message]" — the
// back-fill lines are never prefixed again.
func InboundText(text string, src SessionSource, keys KeyOptions, channelContext string) string {
	if IsSharedMultiUserSession(src, keys) && src.UserName != "" {
		text = "[" + src.UserName + "] " + text
	}
	if channelContext != "" {
		text = channelContext + "\n\n[New message]\n" + text
	}
	return text
}
