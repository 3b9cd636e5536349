package whatsapp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/whatsapp"
	"hermes/domain"
)

// writeFiles creates name → contents in a fresh directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, contents := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(contents), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadAliases(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  map[string][]string
	}{
		{
			name:  "empty dir",
			files: nil,
			want:  map[string][]string{},
		},
		{
			name:  "forward file of row 9",
			files: map[string]string{"lid-mapping-999999999999999.json": `"15551234567@s.whatsapp.net"`},
			want:  map[string][]string{"999999999999999": {"15551234567@s.whatsapp.net"}},
		},
		{
			name:  "reverse file keyed by the id before _reverse",
			files: map[string]string{"lid-mapping-15551234567_reverse.json": `"999999999999999@lid"`},
			want:  map[string][]string{"15551234567": {"999999999999999@lid"}},
		},
		{
			name: "forward and reverse of one id, forward first",
			files: map[string]string{
				"lid-mapping-15551234567_reverse.json": `"999999999999999@lid"`,
				"lid-mapping-15551234567.json":         `"888888888888888@lid"`,
			},
			want: map[string][]string{"15551234567": {"888888888888888@lid", "999999999999999@lid"}},
		},
		{
			name: "contents kept as written, whitespace around JSON allowed",
			files: map[string]string{
				"lid-mapping-1.json": " \"+1555:3@s.whatsapp.net\"\n",
			},
			want: map[string][]string{"1": {"+1555:3@s.whatsapp.net"}},
		},
		{
			name: "ids with the characters the regex allows",
			files: map[string]string{
				"lid-mapping-+1-555.1@lid.json": `"2"`,
				"lid-mapping-AbC.json":          `"3"`,
			},
			want: map[string][]string{"+1-555.1@lid": {"2"}, "AbC": {"3"}},
		},
		{
			name: "invalid contents skipped",
			files: map[string]string{
				"lid-mapping-1.json":         `15551234567`,
				"lid-mapping-2.json":         `"unterminated`,
				"lid-mapping-3.json":         `["15551234567"]`,
				"lid-mapping-4.json":         `{"jid":"15551234567"}`,
				"lid-mapping-5.json":         ``,
				"lid-mapping-6.json":         `null`,
				"lid-mapping-7.json":         `"a" "b"`,
				"lid-mapping-8_reverse.json": `"ok"`,
			},
			want: map[string][]string{"8": {"ok"}},
		},
		{
			name: "unsafe or malformed names skipped",
			files: map[string]string{
				"lid-mapping-a b.json":               `"1"`,
				"lid-mapping-a_b.json":               `"1"`,
				"lid-mapping-..json":                 `"ok"`,
				"lid-mapping-.json":                  `"1"`,
				"lid-mapping-_reverse.json":          `"1"`,
				"lid-mapping-1_reverse_reverse.json": `"1"`,
				"lid-mapping-1.json.bak":             `"1"`,
				"lid-mapping-1.txt":                  `"1"`,
				"LID-MAPPING-1.json":                 `"1"`,
				"creds.json":                         `"1"`,
				"x-lid-mapping-1.json":               `"1"`,
			},
			want: map[string][]string{".": {"ok"}},
		},
		{
			name:  "oversized file skipped",
			files: map[string]string{"lid-mapping-1.json": `"` + strings.Repeat("1", 70<<10) + `"`},
			want:  map[string][]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			got, err := whatsapp.LoadAliases(dir)
			if err != nil {
				t.Fatalf("LoadAliases(dir) error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadAliases(dir) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadAliasesSkipsUnreadable(t *testing.T) {
	dir := writeFiles(t, map[string]string{"lid-mapping-1.json": `"2"`})
	if err := os.Mkdir(filepath.Join(dir, "lid-mapping-3.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "lid-mapping-4.json")); err != nil {
		t.Fatal(err)
	}
	got, err := whatsapp.LoadAliases(dir)
	if err != nil {
		t.Fatalf("LoadAliases(dir) error: %v", err)
	}
	want := map[string][]string{"1": {"2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadAliases(dir) mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadAliasesMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "whatsapp", "session")
	got, err := whatsapp.LoadAliases(dir)
	if err != nil {
		t.Fatalf("LoadAliases(%q) error: %v, want nil", dir, err)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("LoadAliases(%q) = %#v, want an empty non-nil map", dir, got)
	}
}

func TestLoadAliasesNotADir(t *testing.T) {
	dir := writeFiles(t, map[string]string{"session": "not a dir"})
	path := filepath.Join(dir, "session")
	got, err := whatsapp.LoadAliases(path)
	if err == nil {
		t.Errorf("LoadAliases(%q) = %v, nil, want an error", path, got)
	}
}

// TestLoadAliasesCanonical is the §1.4 row-9 file read from disk and walked
// by the domain.
func TestLoadAliasesCanonical(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"lid-mapping-999999999999999.json": `"15551234567@s.whatsapp.net"`,
	})
	aliases, err := whatsapp.LoadAliases(dir)
	if err != nil {
		t.Fatalf("LoadAliases(dir) error: %v", err)
	}
	tests := []struct {
		id   string
		want string
	}{
		{"999999999999999@lid", "15551234567"},
		{"15551234567@s.whatsapp.net", "15551234567"},
		{"888888888888888@lid", "888888888888888"},
	}
	for _, tt := range tests {
		if got := domain.WhatsAppAliases(aliases).Canonical(tt.id); got != tt.want {
			t.Errorf("WhatsAppAliases(LoadAliases(dir)).Canonical(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	src := domain.SessionSource{Platform: domain.PlatformWhatsApp, ChatType: domain.ChatDM, ChatID: "999999999999999@lid"}
	o := domain.DefaultKeyOptions()
	o.WhatsAppAliases = aliases
	if got, want := domain.BuildSessionKey(src, o), "agent:main:whatsapp:dm:15551234567"; got != want {
		t.Errorf("BuildSessionKey(%+v, aliases from disk) = %q, want %q", src, got, want)
	}
}
