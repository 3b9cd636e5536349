package transcripts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"hermes/events"
)

func TestSanitizeTitle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"   ", ""},
		{"  hello world  ", "hello world"},
		{"hello\t\nworld", "hello world"},
		{"hello\x00world", "helloworld"},
		{"\x07\x08test\x1b", "test"},
		{"\ufeffhello", "hello"},
		{"a\u200bb\u202ec\u2066d\ufffce\ufff9f", "abcdef"},
		{"a \u00a0\u3000 b", "a b"},
		{"\x7fdel", "del"},
		{"🚀 launch", "🚀 launch"},
		{"修复 Docker 构建", "修复 Docker 构建"},
		{"café résumé", "café résumé"},
		{strings.Repeat("A", 100), strings.Repeat("A", 100)},
		{" " + strings.Repeat("é", 100) + " ", strings.Repeat("é", 100)},
	} {
		got, err := SanitizeTitle(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("SanitizeTitle(%q) = %q, %v, want %q, nil", tc.in, got, err, tc.want)
		}
	}
	_, err := SanitizeTitle(strings.Repeat("A", 101))
	if !errors.Is(err, ErrTitleTooLong) || err.Error() != "Title too long (101 chars, max 100)" {
		t.Errorf("SanitizeTitle(101×A) error = %v, want %q", err, "Title too long (101 chars, max 100)")
	}
	var tooLong *TitleTooLongError
	if !errors.As(err, &tooLong) || tooLong.Length != 101 {
		t.Errorf("error %v is not a *TitleTooLongError of 101", err)
	}
}

// titled applies one session per title, started in order.
func titled(t *testing.T, titles ...string) *Projection {
	t.Helper()
	p := openTemp(t)
	h := newHistory()
	for i, title := range titles {
		id := "s" + string(rune('a'+i))
		key := "k" + id
		h.lane(key, created(key, id, at(10*i)))
		h.tr(id, events.TitleSet{SessionID: id, Title: title, At: at(10*i + 1)})
	}
	mustApply(t, p, h.all)
	return p
}

func TestResolveTitle(t *testing.T) {
	// sa "my project", sb "my project #2", sc "my project #3", then #10
	// started before #3 to show that the newest wins, not the highest.
	p := titled(t, "my project", "my project #10", "my project #2", "my project #3", "test_project", "testXproject #2",
		"Fix Docker Build", "Fix Docker Build Again", "Unique long title that lists truncate")
	ctx := context.Background()
	for _, tc := range []struct{ title, want string }{
		{"my project", "sd"},    // newest "my project #…"
		{"my project #2", "sc"}, // exact
		{"my project #10", "sb"},
		{"test_project", "se"}, // "_" is literal: testXproject #2 does not match
		{"Fix Docker Build", "sg"},
		{"Unique long title", "si"}, // the unique prefix (#14411)
	} {
		got, err := p.ResolveTitle(ctx, tc.title)
		if err != nil || got != tc.want {
			t.Errorf("ResolveTitle(%q) = %q, %v, want %q", tc.title, got, err, tc.want)
		}
	}
	for _, title := range []string{"Fix Docker", "nothing", "", "test%"} {
		if got, err := p.ResolveTitle(ctx, title); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveTitle(%q) = %q, %v, want ErrNotFound", title, got, err)
		}
	}
	owner, err := p.TitleOwner(ctx, "my project #3")
	if err != nil || owner != "sd" {
		t.Errorf("TitleOwner(my project #3) = %q, %v, want sd", owner, err)
	}
	if _, err := p.TitleOwner(ctx, "my"); !errors.Is(err, ErrNotFound) {
		t.Errorf("TitleOwner(my) error = %v, want ErrNotFound", err)
	}
}

func TestNextTitle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		titles []string
		base   string
		want   string
	}{
		{nil, "my project", "my project"},
		{[]string{"my project"}, "my project", "my project #2"},
		{[]string{"my project", "my project #2", "my project #3"}, "my project", "my project #4"},
		{[]string{"my project", "my project #2"}, "my project #2", "my project #3"},
		{[]string{"my project #5"}, "my project", "my project #6"},
		{[]string{"test_project"}, "testXproject", "testXproject"},
		{[]string{"testXproject #7"}, "test_project", "test_project"},
		{[]string{"a #99999999999999999999"}, "a", "a #100000000000000000000"},
	} {
		p := titled(t, tc.titles...)
		got, err := p.NextTitle(ctx, tc.base)
		if err != nil || got != tc.want {
			t.Errorf("titles %q: NextTitle(%q) = %q, %v, want %q", tc.titles, tc.base, got, err, tc.want)
		}
	}
}
