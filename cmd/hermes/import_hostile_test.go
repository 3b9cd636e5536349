package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/hermeshome"
)

// TestImportRefusesWhatHermesDoesNotWrite: a source home whose files are
// not Hermes' own (a device, a FIFO, a file past its bound, a view where a
// table belongs, a symlink out of the home) is refused with a message
// naming the file, promptly (no read of /dev/zero, no wait on a FIFO, no
// endless query), and nothing is appended, created or renamed. A symlink
// that stays inside the home is followed.
func TestImportRefusesWhatHermesDoesNotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	link := func(t *testing.T, target, name string) {
		t.Helper()
		os.Remove(name)
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	rows := []struct {
		name     string
		given    func(t *testing.T, src string)
		sameHome bool
		want     string // in stderr; "" for an import that succeeds
		then     func(t *testing.T, src string)
	}{
		{name: "sessions.json is a symlink to /dev/zero", want: "leads out of the home, to /dev/zero",
			given: func(t *testing.T, src string) { link(t, "/dev/zero", filepath.Join(src, "sessions", "sessions.json")) }},
		{name: "sessions.json is a character device", want: "is not a regular file (a character device)",
			given: func(t *testing.T, src string) {
				p := filepath.Join(src, "sessions", "sessions.json")
				os.Remove(p)
				if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|5); err != nil { // /dev/zero's numbers
					t.Skipf("mknod: %v", err)
				}
			}},
		{name: "sessions.json past its bound", want: "more than the 268435456 a Hermes home holds there",
			given: func(t *testing.T, src string) {
				if err := os.Truncate(filepath.Join(src, "sessions", "sessions.json"), hermeshome.MaxSessionsJSONBytes+1); err != nil {
					t.Fatal(err) // sparse: nothing is written
				}
			}},
		{name: "state.db is a FIFO", want: "state.db is not a regular file (a FIFO)",
			given: func(t *testing.T, src string) {
				p := filepath.Join(src, "state.db")
				os.Remove(p)
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "messages is a view over an endless recursive query", want: "messages is a view, not a table",
			given: func(t *testing.T, src string) {
				db := openFixtureDB(t, filepath.Join(src, "state.db"))
				defer db.Close()
				if _, err := db.Exec(`DROP TABLE messages; CREATE VIEW messages AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)
					SELECT x AS id, '20260510_090000_aaaa0001' AS session_id, 'user' AS role, 'spin' AS content, 0.0 AS timestamp FROM n`); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "state.db is a symlink out of the home", want: "leads out of the home",
			given: func(t *testing.T, src string) {
				other := t.TempDir()
				writeHermesHome(t, other)
				link(t, filepath.Join(other, "state.db"), filepath.Join(src, "state.db"))
			}},
		{name: "sessions/ is a symlink out of the home, importing the home into itself", sameHome: true, want: "leads out of the home",
			given: func(t *testing.T, src string) {
				other := t.TempDir()
				writeHermesHome(t, other)
				if err := os.RemoveAll(filepath.Join(src, "sessions")); err != nil {
					t.Fatal(err)
				}
				link(t, filepath.Join(other, "sessions"), filepath.Join(src, "sessions"))
			},
			then: func(t *testing.T, src string) {
				if _, err := os.Stat(filepath.Join(src, "sessions", "sessions.json")); err != nil {
					t.Errorf("the sessions.json outside the home was moved: %v", err)
				}
			}},
		{name: "a symlink inside the home is followed",
			given: func(t *testing.T, src string) {
				if err := os.Mkdir(filepath.Join(src, "data"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(src, "state.db"), filepath.Join(src, "data", "state.db")); err != nil {
					t.Fatal(err)
				}
				link(t, filepath.Join("data", "state.db"), filepath.Join(src, "state.db"))
			}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			src := t.TempDir()
			writeHermesHome(t, src)
			row.given(t, src)
			dst := t.TempDir()
			if row.sameHome {
				dst = src
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "import", src, "--home", dst)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("hermes import did not finish in 2 minutes: %s", stderr.String())
			}
			if row.want == "" {
				if err != nil {
					t.Fatalf("hermes import: %v\n%s", err, stderr.String())
				}
				if n := len(logOf(t, dst)); n == 0 {
					t.Fatal("nothing imported")
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), row.want) {
				t.Fatalf("hermes import = %v, stderr %q, want exit 1 saying %q", err, stderr.String(), row.want)
			}
			if _, err := os.Stat(filepath.Join(dst, "hermes", "events.db")); err == nil {
				t.Error("a refused import created an event log")
			}
			if row.then != nil {
				row.then(t, src)
			}
		})
	}
}
