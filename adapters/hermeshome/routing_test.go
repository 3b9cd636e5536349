package hermeshome

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMarkNonFinite(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": NaN}`, `{"a": "\u0000non-finite:NaN"}`},
		{`[Infinity, -Infinity]`, `["\u0000non-finite:Infinity", "\u0000non-finite:-Infinity"]`},
		{`{"s": "NaN and Infinity \" NaN"}`, `{"s": "NaN and Infinity \" NaN"}`},
		{`{"n": 1.5e3}`, `{"n": 1.5e3}`},
	}
	for _, tt := range tests {
		if got := string(markNonFinite([]byte(tt.in))); got != tt.want {
			t.Errorf("markNonFinite(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestReadRoutingCleans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.json")
	data := "{\"_README\": \"x\", \"k:\xff\": {\"session_key\": \"k:\xff\", \"session_id\": \"20260101_000000_aaaaaaaa\", \"created_at\": \"2026-01-01T00:00:00\"}," +
		"\"k:ok\": {\"session_id\": \"20260101_000000_bbbbbbbb\", \"created_at\": \"2026-01-01T00:00:00\", \"updated_at\": \"bad\", \"display_name\": \"a\xffb\", \"estimated_cost_usd\": -Infinity, \"future\": [1, NaN]}," +
		"\"k:path\": {\"session_id\": \"../etc\", \"created_at\": \"2026-01-01T00:00:00\"}}"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep Report
	r, err := ReadRouting(path, time.UTC, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Lanes) != 1 || r.Lanes[0].SessionKey != "k:ok" {
		t.Fatalf("lanes = %+v, want only k:ok", r.Lanes)
	}
	l := r.Lanes[0]
	if l.DisplayName != "a\uFFFDb" || l.EstimatedCostUSD != 0 || !l.UpdatedAt.Equal(l.CreatedAt) || string(l.Extra["future"]) != `[1,"non-finite:NaN"]` {
		t.Errorf("cleaned lane = %+v (extra %s)", l, l.Extra["future"])
	}
	var notes []string
	for _, n := range rep.Notes() {
		notes = append(notes, n.String())
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"not valid UTF-8", "estimated_cost_usd is -Infinity", "updated_at is not a time", `field "future" is kept`, "contains a path separator"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
}
