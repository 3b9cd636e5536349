package fts5

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ftsPhrase is one phrase of a query: its terms in order, or one prefix.
type ftsPhrase struct {
	terms  []string
	prefix bool
}

// fastQuery is a query the Ranker can rank: phrases joined by AND
// (implicit or written) or all by OR.
type fastQuery struct {
	phrases []ftsPhrase
	or      bool
}

// parseFastQuery reads a sanitised query for a table of tokenizer tok into
// phrases, or returns false for anything else (NOT, NEAR, column filters,
// mixed AND and OR, characters whose tokenization it does not reproduce).
// For Unicode61 a word is ASCII letters and digits, folded to lower case,
// optionally a prefix (word*); for Trigram each quoted field of Han
// characters is a phrase of its trigrams.
func parseFastQuery(tok Tokenizer, query string) (fastQuery, bool) {
	var q fastQuery
	ands, ors := 0, 0
	// An operator must stand between two phrases (FTS5 refuses "a OR",
	// "OR a", "a OR AND b"): afterOperator is set at the start and after
	// each operator, cleared by a phrase.
	afterOperator := true
	for i := 0; i < len(query); {
		switch c := query[i]; {
		case c == ' ':
			i++
			continue
		case c == '"':
			end := strings.IndexByte(query[i+1:], '"')
			if end < 0 {
				return q, false
			}
			body := query[i+1 : i+1+end]
			i += end + 2
			if i < len(query) && query[i] != ' ' {
				return q, false // "phrase"* or "a""b"
			}
			p, ok := phraseOf(tok, body)
			if !ok {
				return q, false
			}
			q.phrases = append(q.phrases, p)
		default:
			end := strings.IndexByte(query[i:], ' ')
			if end < 0 {
				end = len(query) - i
			}
			word := query[i : i+end]
			i += end
			switch word {
			case "OR", "AND":
				if afterOperator {
					return q, false
				}
				if word == "OR" {
					ors++
				} else {
					ands++
				}
				afterOperator = true
				continue
			case "NOT", "NEAR":
				return q, false
			}
			if tok != Unicode61 {
				return q, false
			}
			prefix := strings.HasSuffix(word, "*")
			word = strings.TrimSuffix(word, "*")
			if !asciiWord(word) {
				return q, false
			}
			q.phrases = append(q.phrases, ftsPhrase{terms: []string{strings.ToLower(word)}, prefix: prefix})
		}
		afterOperator = false
	}
	if afterOperator {
		return q, false // empty, or ends with an operator
	}
	n := len(q.phrases)
	switch {
	case n == 0 || n > 8 || (ands > 0 && ors > 0):
		return q, false
	case ors > 0:
		q.or = true
		return q, ors == n-1
	default:
		return q, ands <= n-1
	}
}

func asciiWord(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// phraseOf is the phrase of a quoted field.
func phraseOf(tok Tokenizer, body string) (ftsPhrase, bool) {
	var p ftsPhrase
	if tok == Unicode61 {
		// unicode61 splits ASCII text at every character that is not a
		// letter or a digit (docker-compose is docker, compose).
		for i := 0; i < len(body); i++ {
			if body[i] >= 0x80 {
				return p, false
			}
		}
		for _, w := range strings.FieldsFunc(body, func(r rune) bool { return !asciiWord(string(r)) }) {
			p.terms = append(p.terms, strings.ToLower(w))
		}
		return p, len(p.terms) > 0
	}
	// The trigram tokenizer: every run of three characters, at
	// consecutive positions. Han characters have no case to fold.
	rs := []rune(body)
	if len(rs) < 3 {
		return p, false
	}
	for _, r := range rs {
		if !unicode.Is(unicode.Han, r) || r == utf8.RuneError {
			return p, false
		}
	}
	for i := 0; i+3 <= len(rs); i++ {
		p.terms = append(p.terms, string(rs[i:i+3]))
	}
	return p, true
}
