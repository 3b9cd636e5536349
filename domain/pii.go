package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// piiSafePlatforms are the built-in platforms whose ids may be redacted in
// the prompt: none of them needs a raw id inside a message. Discord is left
// out on purpose: its <@id> mentions need the real ids.
var piiSafePlatforms = []string{"whatsapp", "signal", "telegram", "bluebubbles"}

// PIISafePlatform reports whether platform is one of the built-in platforms
// whose ids privacy.redact_pii redacts (WhatsApp, Signal, Telegram,
// BlueBubbles). Plugin platforms registered as pii_safe are passed to
// [ContextSettings.PIISafePlatforms].
func PIISafePlatform(platform string) bool { return slices.Contains(piiSafePlatforms, platform) }

// HashID is the deterministic redaction of an identifier: the first 12 hex
// characters of the SHA-256 of its UTF-8 bytes.
func HashID(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:12]
}

// RedactUserID redacts a sender id to user_<hash>, e.g. "u1" →
// "user_bb82030dbc2b".
func RedactUserID(v string) string { return "user_" + HashID(v) }

// RedactChatID redacts a chat id, keeping a platform prefix: when v has a
// ':' after a non-empty prefix the part after the first ':' is hashed
// ("telegram:12345" → "telegram:5994471abb01", "a:b:c" → "a:333edf7c3ca3");
// otherwise the whole value is ("12345" → "5994471abb01", ":123" →
// "a3d1f6e674ae").
func RedactChatID(v string) string {
	if i := strings.IndexByte(v, ':'); i > 0 {
		return v[:i] + ":" + HashID(v[i+1:])
	}
	return HashID(v)
}
