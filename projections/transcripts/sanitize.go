package transcripts

import (
	"strings"
	"unicode"
)

// MaxFTS5QueryChars caps how much of a user's search text is sanitised and
// sent to FTS5, counted in code points (as Python's len counts them). Search
// terms never need more, and the cap keeps the cost of sanitising and matching
// bounded whatever a caller sends.
const MaxFTS5QueryChars = 512

// SanitizeFTS5Query turns free text typed by a user into a string for an FTS5
// MATCH, following Hermes' _sanitize_fts5_query (schema v11, reference §6.7):
//
//  1. Balanced "…" phrases are set aside and come back unchanged in step 7.
//  2. Each of + { } ( ) : " ^ outside those phrases becomes a space (":" is
//     FTS5's column filter: "TODO: fix" would ask for a column named TODO).
//  3. Runs of * become one *, and a * at the start or after whitespace is
//     dropped (a prefix query needs a term before its *).
//  4. After trimming, a leading operator and the whitespace after it are
//     removed.
//  5. After trimming, a trailing operator and the whitespace before it are
//     removed.
//  6. Each word made of letter/digit/underscore runs joined by ".", "_" or "-"
//     (chat-send, P2.2, snake_case_name) is wrapped in double quotes, in one
//     pass, because FTS5 would otherwise split it into separate terms.
//  7. The phrases are put back and the result is trimmed.
//
// Hardening from later Hermes versions ([C]), applied as separate steps: the
// input is first cut to MaxFTS5QueryChars code points, and in step 2 each of
// @ / # & | ~ [ ] < > , ; ! ? $ = \ ' outside phrases also becomes a space,
// since FTS5 rejects them outside a string. % is kept: the CJK search path
// uses the query in a LIKE pattern and escapes it there.
//
// One deliberate difference from Hermes: steps 4 and 5 remove AND, OR and NOT
// only when spelled in upper case. FTS5 treats only those exact spellings as
// operators; "and", "Or" or "not" are ordinary terms to it, and safe to keep.
// Hermes matched them in any case, so a natural-language query such as
// "and then" lost its first word and searched for "then" alone; here it stays
// "and then" (likewise "salt and" stays "salt and", and a lone "not" is a
// search for the word). Upper-case operators are handled exactly as in Hermes:
// "OR world" becomes "world", "hello AND" becomes "hello", "NOT" becomes "".
// Each end is trimmed once, so "AND OR" becomes "OR", as in Hermes: a lone
// operator is an FTS5 syntax error, which the search turns into no results.
// For the same reason the function is not idempotent on such input.
//
// "Whitespace" and "letter/digit" follow Python's str semantics (Unicode
// letters and numbers, not only ASCII), so CJK text passes through unchanged
// unless it contains one of the characters above. Invalid UTF-8 becomes
// U+FFFD. An empty result means there is nothing to search for.
func SanitizeFTS5Query(q string) string {
	rs := []rune(truncateRunes(q, MaxFTS5QueryChars))

	// Step 1. A phrase is replaced by one marker rune outside the Unicode
	// range, which no decoded input can contain, so user text can never be
	// mistaken for a placeholder (Hermes' "\x00Q0\x00" can). The marker is
	// neither a word character nor whitespace, like Hermes' placeholder as
	// seen from outside.
	var phrases [][]rune
	var s []rune
	for i := 0; i < len(rs); i++ {
		if rs[i] == '"' {
			if end := indexRune(rs[i+1:], '"'); end >= 0 {
				phrases = append(phrases, rs[i:i+1+end+1])
				s = append(s, phraseMarker+rune(len(phrases)-1))
				i += end + 1
				continue
			}
		}
		s = append(s, rs[i])
	}

	// Step 2, with the [C] characters.
	for i, r := range s {
		if strings.ContainsRune(fts5Special, r) || strings.ContainsRune(fts5Unsafe, r) {
			s[i] = ' '
		}
	}

	// Step 3. After the runs are collapsed no * follows another, so each can
	// be judged by the rune before it.
	out := s[:0]
	for _, r := range s {
		if r == '*' && (len(out) == 0 || out[len(out)-1] == '*' || isSpace(out[len(out)-1])) {
			continue
		}
		out = append(out, r)
	}
	s = out

	// Step 4.
	s = trimSpace(s)
	if n := leadingOperatorLen(s); n > 0 {
		s = s[n:]
		for len(s) > 0 && isSpace(s[0]) {
			s = s[1:]
		}
	}

	// Step 5.
	s = trimSpace(s)
	if n := trailingOperatorLen(s); n > 0 && n < len(s) && isSpace(s[len(s)-n-1]) {
		s = s[:len(s)-n]
		for len(s) > 0 && isSpace(s[len(s)-1]) {
			s = s[:len(s)-1]
		}
	}

	// Steps 6 and 7.
	var b strings.Builder
	for i := 0; i < len(s); {
		r := s[i]
		if r >= phraseMarker {
			b.WriteString(string(phrases[r-phraseMarker]))
			i++
			continue
		}
		if !isWord(r) || (i > 0 && isWord(s[i-1])) {
			b.WriteRune(r)
			i++
			continue
		}
		end, joined := joinedWordEnd(s, i)
		if joined {
			b.WriteByte('"')
			b.WriteString(string(s[i:end]))
			b.WriteByte('"')
		} else {
			b.WriteString(string(s[i:end]))
		}
		i = end
	}
	return strings.TrimFunc(b.String(), isSpace)
}

// fts5Special holds the characters Hermes v11 blanks out in step 2.
const fts5Special = `+{}():"^`

// fts5Unsafe holds the characters the [C] hardening also blanks out.
const fts5Unsafe = `@/#&|~[]<>,;!?$=\'`

// phraseMarker is the first of the runes that stand for set-aside phrases.
const phraseMarker rune = unicode.MaxRune + 1

// truncateRunes returns the first n code points of s (each invalid byte
// counting as one, as it becomes one U+FFFD).
func truncateRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func indexRune(s []rune, r rune) int {
	for i, c := range s {
		if c == r {
			return i
		}
	}
	return -1
}

// isSpace reports whether r is whitespace to Python's str.isspace, which
// Hermes' \s and strip() use: Unicode White_Space plus U+001C–U+001F.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// isWord reports whether r matches Python's Unicode \w.
func isWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

func trimSpace(s []rune) []rune {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

var fts5Operators = []string{"AND", "OR", "NOT"}

// leadingOperatorLen returns the length of the upper-case operator that s
// starts with as a whole word, or 0.
func leadingOperatorLen(s []rune) int {
	for _, op := range fts5Operators {
		n := len(op)
		if len(s) >= n && string(s[:n]) == op && (len(s) == n || !isWord(s[n])) {
			return n
		}
	}
	return 0
}

// trailingOperatorLen returns the length of the upper-case operator that s
// ends with, or 0. The caller checks that whitespace precedes it.
func trailingOperatorLen(s []rune) int {
	for _, op := range fts5Operators {
		if n := len(op); len(s) >= n && string(s[len(s)-n:]) == op {
			return n
		}
	}
	return 0
}

// joinedWordEnd matches Hermes' \b(\w+(?:[._-]\w+)+)\b at s[i], where a word
// starts. It returns where the longest chain of word runs joined by single
// "." or "-" ends, and whether that chain is a match: it is when it has a
// join, or when its only run has an underscore with word characters on both
// sides (the regex then uses that underscore as the joiner).
func joinedWordEnd(s []rune, i int) (end int, joined bool) {
	end = wordRunEnd(s, i)
	runs := 1
	for end+1 < len(s) && (s[end] == '.' || s[end] == '-') && isWord(s[end+1]) {
		end = wordRunEnd(s, end+1)
		runs++
	}
	if runs > 1 {
		return end, true
	}
	if end-i < 3 {
		return end, false
	}
	return end, indexRune(s[i+1:end-1], '_') >= 0
}

func wordRunEnd(s []rune, i int) int {
	for i < len(s) && isWord(s[i]) {
		i++
	}
	return i
}

// ContainsCJK reports whether s has a code point in one of the ranges that
// route a search to the CJK path (reference §6.6 step 4): CJK ideographs and
// extensions A and B, CJK symbols and punctuation, hiragana, katakana and
// Hangul syllables.
func ContainsCJK(s string) bool {
	for _, r := range s {
		if isCJK(r) {
			return true
		}
	}
	return false
}

// CJKCount returns how many code points of s are in the ranges of ContainsCJK.
func CJKCount(s string) int {
	n := 0
	for _, r := range s {
		if isCJK(r) {
			n++
		}
	}
	return n
}

func isCJK(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, // CJK Unified Ideographs
		r >= 0x3400 && r <= 0x4DBF,   // Extension A
		r >= 0x20000 && r <= 0x2A6DF, // Extension B
		r >= 0x3000 && r <= 0x303F,   // CJK Symbols and Punctuation
		r >= 0x3040 && r <= 0x309F,   // Hiragana
		r >= 0x30A0 && r <= 0x30FF,   // Katakana
		r >= 0xAC00 && r <= 0xD7AF:   // Hangul Syllables
		return true
	}
	return false
}
