package transcripts

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStoredContentOfStrings: a JSON string's stored text is what
// encoding/json decodes (or, when it cannot, the JSON as it is), whether
// or not the fast path for strings without escapes takes it.
func TestStoredContentOfStrings(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		wantFast bool
	}{
		{`"plain text"`, true},
		{`""`, true},
		{`"袋鼠 and 🦘"`, true},
		{`  "spaces around"  `, true},
		{`"escaped \"quote\" and \n newline"`, false},
		{`"\u00e9 escape"`, false},
		{`"lone \ud800 surrogate"`, false},
		{"\"invalid \xff UTF-8\"", false},
		{"\"raw\ttab\"", false},
		{`"unterminated`, false},
		{`"two" "strings"`, false},
		{`"a"b"`, false},
	} {
		got := storedContent(json.RawMessage(tc.raw))
		var want any
		var s string
		if err := json.Unmarshal([]byte(tc.raw), &s); err == nil {
			want = s
		} else {
			want = strings.TrimSpace(tc.raw)
		}
		if got != want {
			t.Errorf("storedContent(%q) = %q, want %q", tc.raw, got, want)
		}
		if _, ok := plainJSONString([]byte(strings.TrimSpace(tc.raw))); ok != tc.wantFast {
			t.Errorf("plainJSONString(%q) taken = %v, want %v", tc.raw, ok, tc.wantFast)
		}
	}
}
