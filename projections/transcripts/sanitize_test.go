package transcripts

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hermesTable is every row of the reference §6.7 table. want is Hermes'
// output except where hermes says what Hermes gives instead.
var hermesTable = []struct {
	in, want string
	hermes   string // Hermes' output, only where we deliberately differ
}{
	{in: `hello world`, want: `hello world`},
	{in: `C++`, want: `C`},
	{in: `"unterminated`, want: `unterminated`},
	{in: `(problem`, want: `problem`},
	{in: `{test}`, want: `test`},
	{in: `hello AND`, want: `hello`},
	{in: `OR world`, want: `world`},
	{in: `***`, want: ``},
	{in: `deploy*`, want: `deploy*`},
	{in: `"exact phrase"`, want: `"exact phrase"`},
	{in: `"docker networking" setup`, want: `"docker networking" setup`},
	{in: `"hello world" OR "foo bar"`, want: `"hello world" OR "foo bar"`},
	{in: `chat-send`, want: `"chat-send"`},
	{in: `docker-compose-up`, want: `"docker-compose-up"`},
	{in: `fix chat-send bug`, want: `fix "chat-send" bug`},
	{in: `chat-send OR deploy-prod`, want: `"chat-send" OR "deploy-prod"`},
	{in: `"my chat-send thing"`, want: `"my chat-send thing"`},
	{in: `P2.2`, want: `"P2.2"`},
	{in: `simulate.p2.test.ts`, want: `"simulate.p2.test.ts"`},
	{in: `my-app.config`, want: `"my-app.config"`},
	{in: `"chat-send"`, want: `"chat-send"`},
	{in: `snake_case_name`, want: `"snake_case_name"`},
	{in: `v1.2.3-beta`, want: `"v1.2.3-beta"`},
	{in: `foo^bar`, want: `foo bar`},
	{in: `TODO: fix`, want: `TODO  fix`},
	{in: `content:secret "a:b"`, want: `content secret "a:b"`},
	{in: `*deploy`, want: `deploy`},
	{in: `a*b**`, want: `a*b*`},
	{in: `NOT`, want: ``},
	{in: `hello OR`, want: `hello`},
	{in: `and then`, want: `and then`, hermes: `then`},
	{in: `x AND y`, want: `x AND y`},
	{in: `a AND OR b`, want: `a AND OR b`},
	{in: `AND OR`, want: `OR`},
	{in: `100%完成`, want: `100%完成`},
	{in: `记忆断裂`, want: `记忆断裂`},
}

// moreCases covers the operator fix, the [C] hardening, Unicode and the
// corners of the regexes Hermes uses.
var moreCases = []struct{ name, in, want string }{
	// Only upper-case AND/OR/NOT are operators; other spellings are words.
	{"lower-case leading or", `or else`, `or else`},
	{"lower-case leading not", `not found`, `not found`},
	{"mixed-case leading and", `And then`, `And then`},
	{"lower-case lone not", `not`, `not`},
	{"lower-case trailing and", `salt and`, `salt and`},
	{"upper-case leading NOT", `NOT found`, `found`},
	{"upper-case trailing NOT", `hello NOT`, `hello`},
	{"operator must be a whole word", `ANDROID phone`, `ANDROID phone`},
	{"operator before a phrase", `OR"a b"`, `"a b"`},
	{"operator only trimmed once per end", `AND AND x`, `AND x`},

	// [C] hardening: these become spaces outside phrases; % stays.
	{"at sign", `user@host`, `user host`},
	{"slash then dotted word", `gateway/run.py`, `gateway "run.py"`},
	{"apostrophe", `it's`, `it s`},
	{"punctuation", `a,b;c!`, `a b c`},
	{"question mark", `why?`, `why`},
	{"brackets and angles", `[draft] <tag>`, `draft   tag`},
	{"pipes tilde hash amp", `a|b~c#d&e`, `a b c d e`},
	{"dollar equals backslash", `$x=1\y`, `x 1 y`},
	{"percent kept", `50%`, `50%`},
	{"kept inside a phrase", `"it's a/b" x@y`, `"it's a/b" x y`},
	{"stripped before the star rule", `/*foo`, `foo`},

	// Unicode: \w and \s are Python's Unicode classes.
	{"CJK words", `日本語 テスト`, `日本語 テスト`},
	{"hangul", `한국어 검색`, `한국어 검색`},
	{"full-width brackets are not stripped", `（测试）`, `（测试）`},
	{"accented joined word", `café-crème`, `"café-crème"`},
	{"CJK joined word", `记忆-断裂`, `"记忆-断裂"`},
	{"ideographic space trimmed", "\u3000记忆\u3000", `记忆`},
	{"invalid UTF-8 becomes U+FFFD", "a\xffb", "a\uFFFDb"},

	// Corners of step 1, 3 and 6.
	{"empty phrase", `"" x`, `"" x`},
	{"two phrases and a stray quote", `"a" b "c" "d`, `"a" b "c"  d`},
	{"star after phrase kept", `"a b"*`, `"a b"*`},
	{"star after space dropped", `a **b`, `a b`},
	{"double joiner splits", `a--b-c`, `a--"b-c"`},
	{"trailing joiner", `a-b.`, `"a-b".`},
	{"edge underscores are not joiners", `_a a_`, `_a a_`},
	{"interior underscore", `___`, `"___"`},
	{"joined word next to phrase", `x-"a b"`, `x-"a b"`},
	{"placeholder text in input is plain text", "\x00Q0\x00 \"a\"", "\x00Q0\x00 \"a\""},
	{"whitespace only", " \t\n", ``},
}

func TestSanitizeFTS5QueryHermesTable(t *testing.T) {
	for _, tc := range hermesTable {
		if got := SanitizeFTS5Query(tc.in); got != tc.want {
			t.Errorf("SanitizeFTS5Query(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSanitizeFTS5QueryMoreCases(t *testing.T) {
	for _, tc := range moreCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SanitizeFTS5Query(tc.in); got != tc.want {
				t.Errorf("SanitizeFTS5Query(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSanitizeFTS5QueryCapsLength(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"at the cap unchanged", strings.Repeat("a", MaxFTS5QueryChars), strings.Repeat("a", MaxFTS5QueryChars)},
		{"cut to the cap", strings.Repeat("a", MaxFTS5QueryChars+10), strings.Repeat("a", MaxFTS5QueryChars)},
		{"counted in code points", strings.Repeat("记", MaxFTS5QueryChars+1), strings.Repeat("记", MaxFTS5QueryChars)},
		{"cut inside a phrase", strings.Repeat("x", MaxFTS5QueryChars-2) + ` "ab"`, strings.Repeat("x", MaxFTS5QueryChars-2)},
		{"invalid bytes count one each", strings.Repeat("\xff", MaxFTS5QueryChars+5), strings.Repeat("\uFFFD", MaxFTS5QueryChars)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SanitizeFTS5Query(tc.in); got != tc.want {
				t.Errorf("SanitizeFTS5Query(%d runes) = %d runes %.20q…, want %d runes",
					utf8.RuneCountInString(tc.in), utf8.RuneCountInString(got), got, utf8.RuneCountInString(tc.want))
			}
		})
	}
}

// notIdempotent lists table inputs whose output still starts or ends with an
// operator, because each end is trimmed only once (as in Hermes).
var notIdempotent = map[string]bool{
	`AND OR`:    true, // → "OR" → ""
	`AND AND x`: true, // → "AND x" → "x"
}

func TestSanitizeFTS5QueryIdempotent(t *testing.T) {
	var inputs []string
	for _, tc := range hermesTable {
		inputs = append(inputs, tc.in)
	}
	for _, tc := range moreCases {
		inputs = append(inputs, tc.in)
	}
	for _, in := range inputs {
		once := SanitizeFTS5Query(in)
		twice := SanitizeFTS5Query(once)
		if notIdempotent[in] {
			if twice == once {
				t.Errorf("SanitizeFTS5Query(%q) is now idempotent; drop it from notIdempotent", in)
			}
			continue
		}
		if twice != once {
			t.Errorf("SanitizeFTS5Query(%q) = %q, want %q (the input was SanitizeFTS5Query(%q))", once, twice, once, in)
		}
	}
}

func TestContainsCJKAndCJKCount(t *testing.T) {
	tests := []struct {
		in    string
		count int
	}{
		{"", 0},
		{"hello world", 0},
		{"100%完成", 2},
		{"记忆断裂", 4},
		{"こんにちは", 5},
		{"カタカナ", 4},
		{"한국어", 3},
		{"\u3000", 1}, // ideographic space, in CJK Symbols and Punctuation
		{"\u303F", 1}, // last of that block
		{"\u2FFF", 0}, // just before it
		{"\u3400", 1}, // Extension A
		{"\u4DBF", 1}, // last of Extension A
		{"\u4DC0", 0}, // Yijing hexagrams, between the ranges
		{"\u9FFF", 1}, // last unified ideograph of the range
		{"\uA000", 0}, // Yi, just after
		{"\uD7AF", 1}, // last Hangul syllable of the range
		{"\uD7B0", 0}, // Hangul Jamo Extended-B
		{"\U00020000", 1},
		{"\U0002A6DF", 1},
		{"\U0002A6E0", 0},
		{"\uFF21", 0}, // full-width A
		{"\xff", 0},
		{"mixed 中文 and カナ", 4},
	}
	for _, tc := range tests {
		if got := CJKCount(tc.in); got != tc.count {
			t.Errorf("CJKCount(%q) = %d, want %d", tc.in, got, tc.count)
		}
		if got, want := ContainsCJK(tc.in), tc.count > 0; got != want {
			t.Errorf("ContainsCJK(%q) = %t, want %t", tc.in, got, want)
		}
	}
}

func FuzzSanitizeFTS5Query(f *testing.F) {
	for _, tc := range hermesTable {
		f.Add(tc.in)
	}
	for _, tc := range moreCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := SanitizeFTS5Query(in)
		if !utf8.ValidString(out) {
			t.Fatalf("SanitizeFTS5Query(%q) = %q, not valid UTF-8", in, out)
		}
		if n := strings.Count(out, `"`); n%2 != 0 {
			t.Fatalf("SanitizeFTS5Query(%q) = %q, has %d double quotes, want an even number", in, out, n)
		}
		// Only step 6 adds runes: two quotes around a chain of one or more
		// word runs of the input.
		if got, limit := utf8.RuneCountInString(out), utf8.RuneCountInString(in)+2*wordRuns(in); got > limit {
			t.Fatalf("SanitizeFTS5Query(%q) = %q, %d runes, want at most %d", in, out, got, limit)
		}
		if strings.TrimSpace(out) != out {
			t.Fatalf("SanitizeFTS5Query(%q) = %q, not trimmed", in, out)
		}
		// With no quote in the input there is no phrase to protect anything,
		// so none of the blanked-out characters may survive (quotes may: step 6
		// adds them).
		if !strings.Contains(in, `"`) {
			if i := strings.IndexAny(out, "+{}()^"+fts5Unsafe); i >= 0 {
				t.Fatalf("SanitizeFTS5Query(%q) = %q, still has %q", in, out, out[i])
			}
		}
	})
}

// wordRuns counts the maximal runs of Unicode letters, digits and
// underscores in s.
func wordRuns(s string) int {
	n, in := 0, false
	for _, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}
