package main

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets TestExitStatus run the real main in a child process.
func TestMain(m *testing.M) {
	if dir := os.Getenv("IMPORTCHECK_TEST_RUN_MAIN"); dir != "" {
		os.Args = []string{"importcheck", dir}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cleanTree is a module that follows every rule. It also holds files that
// break them where the checker must not look (tests, testdata, vendor,
// hidden and underscore directories, a nested module), so a checker that
// looked there would fail TestCheckClean. Its paths are a sketch of the
// layout, not the real tree: "kurrentdb" stands for the second store
// adapter (the real ones live under adapters/eventstore/).
func cleanTree() map[string]string {
	return map[string]string{
		"go.mod":    "module hermes\n\ngo 1.26\n",
		"README.md": "import \"os\"\n",

		"events/event.go": `package events

import (
	"encoding/json"
	"errors"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

var ErrX = errors.New("x")

type E struct{ At time.Time }

func Later(t time.Time) time.Time {
	_, _ = json.Marshal, jsonv2.Unmarshal
	_ = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return t.Add(time.Hour)
}
`,
		"events/sub/sub.go": "package sub\n\nimport \"hermes/events\"\n\nvar _ events.E\n",
		"domain/key.go": `package domain

import (
	"crypto/sha256"
	"io"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	tm "time"

	"hermes/events"
)

var re = regexp.MustCompile("x")

// Fresh calls After, a name of the clock-read list, on a value: allowed.
func Fresh(now, then tm.Time, e events.E) bool {
	_, _, _, _, _ = sha256.New, io.EOF, netip.Addr{}, url.Parse, slices.Sort[[]int]
	return now.After(then) && now.Sub(then) < tm.Minute && !tm.Unix(0, 0).IsZero()
}
`,
		"domain/key_test.go": `package domain_test

import (
	"os"
	"time"

	"github.com/google/go-cmp/cmp"
	"hermes/testfixtures"
)

var _, _, _ = os.Getenv, time.Now(), cmp.Diff
var _ testfixtures.Clock
`,
		"commands/resolve.go": `package commands

import (
	"context"
	"time"

	"github.com/google/uuid"
	"hermes/domain"
	"hermes/events"
)

var _, _, _, _ = context.Background, time.Now, uuid.New, domain.Lane{}
var _ events.E
`,
		"projections/sessions.go": `package projections

import (
	"database/sql"

	"hermes/domain"
	"hermes/events"
)
`,
		"adapters/doc.go": "package adapters\n\nimport \"hermes/events\"\n",
		"adapters/sqlite/store.go": `package sqlite

import (
	"database/sql"
	"os"

	_ "modernc.org/sqlite"
	"hermes/adapters/sqlite/migrations"
	"hermes/commands"
	"hermes/events"
	"hermes/projections"
)
`,
		"adapters/sqlite/migrations/embed.go": "package migrations\n\nimport _ \"embed\"\n",
		"adapters/sqlite/store_test.go":       "package sqlite\n\nimport \"hermes/adapters/kurrentdb\"\nimport \"hermes/testfixtures/storetest\"\n",
		"api/server.go": `package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections"
)
`,
		"node/node.go": `package node

import (
	"log/slog"
	"net/http"
	"os"

	"hermes/adapters/sqlite"
	"hermes/api"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/node/internal/x"
	"hermes/projections"
)
`,
		"node/internal/x/x.go": "package x\n",
		"node/node_test.go":    "package node\n\nimport \"hermes/testfixtures\"\n",
		"testfixtures/clock.go": `package testfixtures

import (
	"sync"
	"testing"
	"time"

	"hermes/adapters/sqlite"
	"hermes/commands"
	"hermes/domain"
)

var _ = time.Now
`,
		"testfixtures/storetest/suite.go": "package storetest\n\nimport \"hermes/testfixtures\"\n",
		"cmd/hermes/main.go": `package main

import (
	"context"
	"os"
	"time"

	"hermes/adapters/sqlite"
	"hermes/api"
	"hermes/domain"
	"hermes/node"
)

func main() { _ = time.Now() }
`,
		"cmd/hermes/main_test.go": "package main\n\nimport \"hermes/testfixtures\"\n",

		"events/testdata/bad.go":      "package bad\n\nimport \"os\"\n",
		"domain/testdata/x/bad.go":    "package bad\n\nimport \"hermes/commands\"\n",
		"vendor/github.com/x/y/y.go":  "package y\n\nimport \"os\"\n",
		".git/hooks/bad.go":           "package bad\n",
		"domain/.scratch/bad.go":      "package bad\n\nimport \"os\"\n",
		"_attic/old.go":               "package old\n",
		"tools/go.mod":                "module hermes/tools\n",
		"tools/tools.go":              "package tools\n\nimport _ \"honnef.co/go/tools\"\n",
		"events/notgo.go.txt":         "import \"os\"\n",
		"events/event_linux_test.go":  "package events\n\nimport \"os\"\n",
		"domain/export_test.go":       "package domain\n\nimport \"sync\"\n\nvar mu sync.Mutex\n",
		"events/zz_generated_test.go": "package events\n\nimport \"context\"\n",
	}
}

// writeTree writes files (slash paths → contents) under a fresh directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, contents := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(contents), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func violationStrings(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

func TestCheckClean(t *testing.T) {
	root := writeTree(t, cleanTree())
	got, err := Check(root)
	if err != nil {
		t.Fatalf("Check(clean tree) error: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("Check(clean tree) = %q, want no violations", violationStrings(got))
	}
}

// importing returns a one-import file; its import path sits at line 3,
// column 8.
func importing(pkg, imp string) string {
	return "package " + pkg + "\n\nimport \"" + imp + "\"\n"
}

func TestCheckViolations(t *testing.T) {
	impure := []string{
		"os", "io/fs", "io/ioutil", "net", "net/http", "log", "log/slog", "math/rand", "math/rand/v2",
		"crypto/rand", "context", "sync", "database/sql", "syscall",
		"os/exec", "os/signal", "sync/atomic", "net/http/httptest", "log/syslog", "database/sql/driver",
	}
	var impureFile strings.Builder
	impureFile.WriteString("package domain\n\nimport (\n")
	var impureWant []string
	for i, p := range impure {
		impureFile.WriteString("\t\"" + p + "\"\n")
		impureWant = append(impureWant, "domain/impure.go:"+strconv.Itoa(4+i)+":2: domain may not import \""+p+"\" (no I/O, clock, randomness, logging, context or shared state)")
	}
	impureFile.WriteString(")\n")

	var clockFile strings.Builder
	clockFile.WriteString("package events\n\nimport \"time\"\n\nfunc f() {\n")
	var clockWant []string
	reads := slices.Sorted(maps.Keys(clockReads))
	for i, name := range reads {
		clockFile.WriteString("\t_ = time." + name + "\n")
		clockWant = append(clockWant, "events/clock.go:"+strconv.Itoa(6+i)+":6: events may not use time."+name+" (take now as an argument)")
	}
	clockFile.WriteString("}\n")

	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "events imports domain",
			files: map[string]string{"events/bad.go": importing("events", "hermes/domain")},
			want:  []string{`events/bad.go:3:8: events may not import "hermes/domain"`},
		},
		{
			name:  "events subpackage imports commands",
			files: map[string]string{"events/sub/bad.go": importing("sub", "hermes/commands")},
			want:  []string{`events/sub/bad.go:3:8: events may not import "hermes/commands"`},
		},
		{
			name:  "events imports third-party",
			files: map[string]string{"events/bad.go": importing("events", "github.com/google/go-cmp/cmp")},
			want:  []string{`events/bad.go:3:8: events may not import third-party "github.com/google/go-cmp/cmp"`},
		},
		{
			name:  "events imports a package of JSON v2 other than json",
			files: map[string]string{"events/bad.go": importing("events", "github.com/go-json-experiment/json/jsontext")},
			want:  []string{`events/bad.go:3:8: events may not import third-party "github.com/go-json-experiment/json/jsontext"`},
		},
		{
			name:  "domain imports JSON v2",
			files: map[string]string{"domain/bad.go": importing("domain", "github.com/go-json-experiment/json")},
			want:  []string{`domain/bad.go:3:8: domain may not import third-party "github.com/go-json-experiment/json"`},
		},
		{
			name:  "domain imports third-party",
			files: map[string]string{"domain/bad.go": importing("domain", "github.com/google/uuid")},
			want:  []string{`domain/bad.go:3:8: domain may not import third-party "github.com/google/uuid"`},
		},
		{
			name:  "events imports cgo",
			files: map[string]string{"events/bad.go": importing("events", "C")},
			want:  []string{`events/bad.go:3:8: events may not import third-party "C"`},
		},
		{
			name:  "events imports os",
			files: map[string]string{"events/bad.go": importing("events", "os")},
			want:  []string{`events/bad.go:3:8: events may not import "os" (no I/O, clock, randomness, logging, context or shared state)`},
		},
		{
			name:  "domain imports every impure package",
			files: map[string]string{"domain/impure.go": impureFile.String()},
			want:  impureWant,
		},
		{
			name:  "events uses every clock read",
			files: map[string]string{"events/clock.go": clockFile.String()},
			want:  clockWant,
		},
		{
			name: "domain calls time.Now through an alias",
			files: map[string]string{"domain/bad.go": `package domain

import clock "time"

func f() clock.Time { return clock.Now().Add(clock.Since(clock.Time{})) }
`},
			want: []string{
				"domain/bad.go:5:30: domain may not use time.Now (take now as an argument)",
				"domain/bad.go:5:46: domain may not use time.Since (take now as an argument)",
			},
		},
		{
			name:  "domain dot-imports time",
			files: map[string]string{"domain/bad.go": "package domain\n\nimport . \"time\"\n\nvar _ = Now\n"},
			want:  []string{`domain/bad.go:3:8: domain may not dot-import "time" (it hides clock reads)`},
		},
		{
			name:  "commands may read the clock",
			files: map[string]string{"commands/clock.go": "package commands\n\nimport \"time\"\n\nvar _ = time.Now()\n"},
			want:  nil,
		},
		{
			name:  "domain imports commands",
			files: map[string]string{"domain/bad.go": importing("domain", "hermes/commands")},
			want:  []string{`domain/bad.go:3:8: domain may not import "hermes/commands"`},
		},
		{
			name:  "domain imports projections",
			files: map[string]string{"domain/bad.go": importing("domain", "hermes/projections")},
			want:  []string{`domain/bad.go:3:8: domain may not import "hermes/projections"`},
		},
		{
			name:  "commands imports projections",
			files: map[string]string{"commands/bad.go": importing("commands", "hermes/projections")},
			want:  []string{`commands/bad.go:3:8: commands may not import "hermes/projections"`},
		},
		{
			name:  "commands imports an adapter",
			files: map[string]string{"commands/bad.go": importing("commands", "hermes/adapters/sqlite")},
			want:  []string{`commands/bad.go:3:8: commands may not import "hermes/adapters/sqlite"`},
		},
		{
			name:  "projections imports commands",
			files: map[string]string{"projections/bad.go": importing("projections", "hermes/commands")},
			want:  []string{`projections/bad.go:3:8: projections may not import "hermes/commands"`},
		},
		{
			name:  "projections imports the module root",
			files: map[string]string{"projections/bad.go": importing("projections", "hermes")},
			want:  []string{`projections/bad.go:3:8: projections may not import "hermes"`},
		},
		{
			name:  "adapter imports another adapter",
			files: map[string]string{"adapters/kurrentdb/bad.go": importing("kurrentdb", "hermes/adapters/sqlite")},
			want:  []string{`adapters/kurrentdb/bad.go:3:8: adapters/kurrentdb may not import "hermes/adapters/sqlite" (another adapter)`},
		},
		{
			name:  "adapter subpackage imports another adapter's subpackage",
			files: map[string]string{"adapters/kurrentdb/internal/x.go": importing("internal", "hermes/adapters/sqlite/migrations")},
			want:  []string{`adapters/kurrentdb/internal/x.go:3:8: adapters/kurrentdb may not import "hermes/adapters/sqlite/migrations" (another adapter)`},
		},
		{
			name:  "adapters root imports an adapter",
			files: map[string]string{"adapters/bad.go": importing("adapters", "hermes/adapters/sqlite")},
			want:  []string{`adapters/bad.go:3:8: adapters may not import "hermes/adapters/sqlite" (another adapter)`},
		},
		{
			name:  "adapter imports domain",
			files: map[string]string{"adapters/whatsapp/bad.go": importing("whatsapp", "hermes/domain")},
			want:  []string{`adapters/whatsapp/bad.go:3:8: adapters/whatsapp may not import "hermes/domain"`},
		},
		{
			name:  "adapter imports api",
			files: map[string]string{"adapters/sqlite/bad.go": importing("sqlite", "hermes/api")},
			want:  []string{`adapters/sqlite/bad.go:3:8: adapters/sqlite may not import "hermes/api"`},
		},
		{
			name:  "adapter imports cmd",
			files: map[string]string{"adapters/sqlite/bad.go": importing("sqlite", "hermes/cmd/hermes")},
			want:  []string{`adapters/sqlite/bad.go:3:8: adapters/sqlite may not import "hermes/cmd/hermes"`},
		},
		{
			name:  "api imports an adapter",
			files: map[string]string{"api/bad.go": importing("api", "hermes/adapters/sqlite")},
			want:  []string{`api/bad.go:3:8: api may not import "hermes/adapters/sqlite"`},
		},
		{
			name:  "api imports cmd",
			files: map[string]string{"api/bad.go": importing("api", "hermes/cmd/hermes")},
			want:  []string{`api/bad.go:3:8: api may not import "hermes/cmd/hermes"`},
		},
		{
			name:  "api imports node",
			files: map[string]string{"api/bad.go": importing("api", "hermes/node")},
			want:  []string{`api/bad.go:3:8: only cmd may import "hermes/node"`},
		},
		{
			name:  "adapter imports node",
			files: map[string]string{"adapters/sqlite/bad.go": importing("sqlite", "hermes/node")},
			want:  []string{`adapters/sqlite/bad.go:3:8: only cmd may import "hermes/node"`},
		},
		{
			name:  "commands imports node",
			files: map[string]string{"commands/bad.go": importing("commands", "hermes/node")},
			want:  []string{`commands/bad.go:3:8: only cmd may import "hermes/node"`},
		},
		{
			name:  "testfixtures imports node",
			files: map[string]string{"testfixtures/bad.go": importing("testfixtures", "hermes/node")},
			want:  []string{`testfixtures/bad.go:3:8: only cmd may import "hermes/node"`},
		},
		{
			name:  "node imports cmd",
			files: map[string]string{"node/bad.go": importing("node", "hermes/cmd/hermes")},
			want:  []string{`node/bad.go:3:8: node may not import "hermes/cmd/hermes"`},
		},
		{
			name:  "node imports testfixtures",
			files: map[string]string{"node/bad.go": importing("node", "hermes/testfixtures")},
			want:  []string{`node/bad.go:3:8: only _test.go files may import "hermes/testfixtures"`},
		},
		{
			name:  "cmd imports testfixtures",
			files: map[string]string{"cmd/hermes/bad.go": importing("main", "hermes/testfixtures")},
			want:  []string{`cmd/hermes/bad.go:3:8: only _test.go files may import "hermes/testfixtures"`},
		},
		{
			name:  "adapter imports a testfixtures subpackage",
			files: map[string]string{"adapters/sqlite/bad.go": importing("sqlite", "hermes/testfixtures/storetest")},
			want:  []string{`adapters/sqlite/bad.go:3:8: only _test.go files may import "hermes/testfixtures/storetest"`},
		},
		{
			name:  "domain imports testfixtures",
			files: map[string]string{"domain/bad.go": importing("domain", "hermes/testfixtures")},
			want:  []string{`domain/bad.go:3:8: only _test.go files may import "hermes/testfixtures"`},
		},
		{
			name:  "file in the module root",
			files: map[string]string{"main.go": "package main\n"},
			want:  []string{"main.go: file outside the layer folders (events, domain, commands, projections, adapters, api, node, testfixtures, cmd)"},
		},
		{
			name:  "file in an unknown folder",
			files: map[string]string{"internal/x/x.go": "package x\n"},
			want:  []string{"internal/x/x.go: file outside the layer folders (events, domain, commands, projections, adapters, api, node, testfixtures, cmd)"},
		},
		{
			name: "several violations in file order",
			files: map[string]string{
				"domain/a.go": importing("domain", "os"),
				"domain/b.go": "package domain\n\nimport (\n\t\"time\"\n\n\t\"hermes/api\"\n)\n\nvar _ = time.Now\n",
			},
			want: []string{
				`domain/a.go:3:8: domain may not import "os" (no I/O, clock, randomness, logging, context or shared state)`,
				`domain/b.go:6:2: domain may not import "hermes/api"`,
				`domain/b.go:9:9: domain may not use time.Now (take now as an argument)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := cleanTree()
			maps.Copy(files, tt.files)
			root := writeTree(t, files)
			got, err := Check(root)
			if err != nil {
				t.Fatalf("Check(tree) error: %v", err)
			}
			if diff := cmp.Diff(tt.want, violationStrings(got)); diff != "" {
				t.Errorf("Check(tree) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckDottedModule: with a module path like "example.com/hermes" its
// own packages must not be mistaken for third-party ones.
func TestCheckDottedModule(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":        "module \"example.com/hermes\" // quoted, with a comment\n\ngo 1.26\n",
		"domain/ok.go":  importing("domain", "example.com/hermes/events"),
		"events/bad.go": importing("events", "example.com/hermes/domain"),
		"api/bad.go":    importing("api", "example.com/hermes/testfixtures"),
	})
	got, err := Check(root)
	if err != nil {
		t.Fatalf("Check(tree) error: %v", err)
	}
	want := []string{
		`api/bad.go:3:8: only _test.go files may import "example.com/hermes/testfixtures"`,
		`events/bad.go:3:8: events may not import "example.com/hermes/domain"`,
	}
	if diff := cmp.Diff(want, violationStrings(got)); diff != "" {
		t.Errorf("Check(tree) mismatch (-want +got):\n%s", diff)
	}
}

func TestCheckErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"no go.mod", map[string]string{"events/e.go": "package events\n"}},
		{"go.mod without module line", map[string]string{"go.mod": "go 1.26\n", "events/e.go": "package events\n"}},
		{"unparsable file", map[string]string{"go.mod": "module hermes\n", "events/e.go": "package events\n\nimport (\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			got, err := Check(root)
			if err == nil {
				t.Errorf("Check(tree) = %q, nil, want an error", violationStrings(got))
			}
		})
	}
}

func TestFindModuleRoot(t *testing.T) {
	root := writeTree(t, map[string]string{"go.mod": "module hermes\n", "domain/sub/x.go": "package sub\n"})
	for _, start := range []string{root, filepath.Join(root, "domain"), filepath.Join(root, "domain", "sub")} {
		got, err := findModuleRoot(start)
		if err != nil {
			t.Fatalf("findModuleRoot(%q) error: %v", start, err)
		}
		if got != root {
			t.Errorf("findModuleRoot(%q) = %q, want %q", start, got, root)
		}
	}
}

// TestExitStatus runs main in a child process: exit 0 and no output on a
// clean tree, exit 1 and one line per violation otherwise, exit 2 when the
// tree cannot be checked.
func TestExitStatus(t *testing.T) {
	dirty := cleanTree()
	dirty["events/bad.go"] = importing("events", "os")
	dirty["domain/bad.go"] = importing("domain", "hermes/api")
	tests := []struct {
		name       string
		files      map[string]string
		start      string
		wantCode   int
		wantStdout string
	}{
		{"clean", cleanTree(), "", 0, ""},
		{"clean, from a subdirectory", cleanTree(), "domain", 0, ""},
		{"violations", dirty, "events", 1,
			`domain/bad.go:3:8: domain may not import "hermes/api"` + "\n" +
				`events/bad.go:3:8: events may not import "os" (no I/O, clock, randomness, logging, context or shared state)` + "\n"},
		{"unparsable", map[string]string{"go.mod": "module hermes\n", "events/e.go": "package"}, "", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "IMPORTCHECK_TEST_RUN_MAIN="+filepath.Join(root, tt.start))
			var stdout strings.Builder
			cmd.Stdout = &stdout
			err := cmd.Run()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("run importcheck: %v", err)
			}
			if code != tt.wantCode {
				t.Errorf("importcheck exit status = %d, want %d", code, tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
				t.Errorf("importcheck stdout mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
