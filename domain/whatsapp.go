package domain

import (
	"regexp"
	"slices"
	"strings"
)

// WhatsAppAliases is the alias graph of the WhatsApp bridge's
// lid-mapping-<id>.json and lid-mapping-<id>_reverse.json files: for each
// <id> of a file name, the normalised identifiers its files hold. An adapter
// reads the files; the domain only walks the graph.
type WhatsAppAliases map[string][]string

// whatsAppIdentifier is what an id must look like before it is used to name a
// mapping file (protection against path traversal).
var whatsAppIdentifier = regexp.MustCompile(`^[A-Za-z0-9@.+\-]+$`)

// NormalizeWhatsAppIdentifier strips a WhatsApp JID to its bare number or LID:
// trim, remove the first "+", keep what precedes the first ":" and then the
// first "@". "60123456789:47@s.whatsapp.net" → "60123456789".
func NormalizeWhatsAppIdentifier(v string) string {
	v = strings.TrimSpace(v)
	v = strings.Replace(v, "+", "", 1)
	v, _, _ = strings.Cut(v, ":")
	v, _, _ = strings.Cut(v, "@")
	return v
}

// ValidWhatsAppIdentifier reports whether id may name a mapping file.
func ValidWhatsAppIdentifier(id string) bool { return whatsAppIdentifier.MatchString(id) }

// Expand returns every identifier reachable from id through the mapping
// files, breadth first; it always contains the normalised id itself. Aliases
// that fail the safety pattern are dropped, as the bridge's reader does.
func (a WhatsAppAliases) Expand(id string) []string {
	start := NormalizeWhatsAppIdentifier(id)
	if start == "" {
		return nil
	}
	seen := map[string]bool{start: true}
	out := []string{start}
	for i := 0; i < len(out); i++ {
		cur := out[i]
		if !ValidWhatsAppIdentifier(cur) {
			continue
		}
		for _, next := range a[cur] {
			next = NormalizeWhatsAppIdentifier(next)
			if next != "" && !seen[next] && ValidWhatsAppIdentifier(next) {
				seen[next] = true
				out = append(out, next)
			}
		}
	}
	return out
}

// Canonical returns the canonical form of a WhatsApp identifier: among its
// aliases, the shortest, then the lexicographically smallest — so a phone
// number beats a 15-digit LID. "" when the id normalises to "".
func (a WhatsAppAliases) Canonical(id string) string {
	all := a.Expand(id)
	if len(all) == 0 {
		return ""
	}
	return slices.MinFunc(all, func(x, y string) int {
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
}
