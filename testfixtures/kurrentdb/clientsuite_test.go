//go:build unix

package kurrentdb_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/testfixtures/kurrentdb"
)

// clientModule is the client whose own tests run against the emulator.
const clientModule = "github.com/EventStore/EventStore-Client-Go/v4"

// claimedTests selects the client's tests of what the emulator emulates:
// TestStreams (appends, stream metadata, reads, catch-up subscriptions,
// deletes and tombstones, connections, a not-leader retry on a cluster) and
// the stream-metadata tests of types_test.go. TestPersistentSubscriptions,
// TestProjections, TestPlugins (client certificates) and TestExpectations
// (a prepared data set in a container image) are outside it.
const claimedTests = `^(TestStreams|TestConsistentMetadataSerialization.*|TestCustomPropertyRetrievalFromStreamMetadata|TestUnknownCustomPropertyRetrievalFromStreamMetadata|TestGetAllCustomPropertiesFromStreamMetadata)$`

// mustPass are the client's tests of deletes, tombstones and stream
// metadata: each has to run and pass, not be skipped.
var mustPass = []string{
	"TestStreams/DeleteTests/canDeleteStream",
	"TestStreams/DeleteTests/canTombstoneStream",
	"TestStreams/DeleteTests/detectStreamDeleted",
	"TestStreams/AppendTests/metadataOperation",
	"TestStreams/ReadStreamTests/readStreamWithMaxAge",
	"TestStreams/ReadStreamTests/readStreamNotFound",
	"TestConsistentMetadataSerializationStreamAcl",
	"TestConsistentMetadataSerializationUserStreamAcl",
	"TestConsistentMetadataSerializationSystemStreamAcl",
	"TestCustomPropertyRetrievalFromStreamMetadata",
	"TestUnknownCustomPropertyRetrievalFromStreamMetadata",
	"TestGetAllCustomPropertiesFromStreamMetadata",
}

// TestOfficialClientSuite runs EventStore-Client-Go v4.2.0's own tests,
// unmodified, from the module cache, against the emulator, started where
// the suite looks for a server: with CLUSTER=true it connects to
// esdb://admin:changeit@localhost:2111,localhost:2112,localhost:2113 over
// TLS without verifying the certificate, so the emulator serves a leader
// and two followers on those loopback ports. The suite is built in a copy
// of the client module whose go.mod and go.sum are hermes' own (which list
// the suite's test dependencies, see clientsuite_deps.go), offline.
//
// HERMES_CLIENT_SUITE=all runs every top-level test of the suite, one at a
// time, and only reports the counts per file.
func TestOfficialClientSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the client's test suite in a go test of its own")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the client's tests: %v", err)
	}
	work := clientModuleCopy(t, goBin)
	files := suiteFuncFiles(t, filepath.Join(work, "esdb"))

	lockSuitePorts(t)
	if os.Getenv("HERMES_CLIENT_SUITE") == "all" {
		all := suiteResults{}
		for _, name := range topLevelTests(files) {
			res, _ := runSuite(t, goBin, work, "^"+name+"$")
			for k, v := range res {
				all[k] = v
			}
		}
		t.Log("EventStore-Client-Go v4.2.0, every top-level test (CLUSTER=true, emulator):\n" + all.table(files))
		return
	}

	res, out := runSuite(t, goBin, work, claimedTests)
	t.Log("EventStore-Client-Go v4.2.0 against the emulator (CLUSTER=true):\n" + res.table(files))
	var failed []string
	for name, action := range res {
		if action == "fail" && res.leaf(name) {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	if len(failed) > 0 {
		t.Errorf("client tests failed: %s\n%s", strings.Join(failed, ", "), tail(out, 80))
	}
	for _, name := range mustPass {
		if res[name] != "pass" {
			t.Errorf("client test %s = %q, want pass", name, res[name])
		}
	}
}

// clientModuleCopy copies the client module from the module cache into a
// temporary directory, with hermes' go.mod (renamed) and go.sum.
func clientModuleCopy(t *testing.T, goBin string) string {
	t.Helper()
	dir := goOutput(t, goBin, ".", "list", "-m", "-f", "{{.Dir}}", clientModule)
	if dir == "" {
		t.Fatalf("%s is not in the module cache: run go mod download", clientModule)
	}
	gomod := goOutput(t, goBin, ".", "env", "GOMOD")
	work := filepath.Join(t.TempDir(), "client")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		target := filepath.Join(work, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
	mod, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(mod), "\n") {
		switch f := strings.Fields(line); {
		case len(f) >= 2 && f[0] == "module":
			line = "module " + clientModule
		case len(f) >= 1 && f[0] == "tool",
			len(f) >= 2 && f[0] == clientModule:
			continue
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(filepath.Dir(gomod), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	return work
}

func goOutput(t *testing.T, goBin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// lockSuitePorts takes a lock shared by every hermes checkout on this
// machine, so that two runs of the suite do not both want ports 2111-2113.
func lockSuitePorts(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "hermes-kurrentdb-client-suite.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock the suite's ports: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}

// suiteResults is each test's final action (pass, fail or skip), by its
// full name.
type suiteResults map[string]string

// runSuite runs the client's tests matching pattern with CLUSTER=true and
// EVENTSTORE_INSECURE=false (a cluster with TLS and credentials, as the
// client's own `make clusterNode` does), without network, against a fresh
// emulator: the suite names its streams and groups from a generator seeded
// with 0, so a second run on the same database would find them taken.
func runSuite(t *testing.T, goBin, work, pattern string) (suiteResults, string) {
	t.Helper()
	cert, err := kurrentdb.SelfSignedCert("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kurrentdb.Start(
		kurrentdb.WithAddr("localhost:2111"),
		kurrentdb.WithFollowers("localhost:2112", "localhost:2113"),
		kurrentdb.WithTLS(cert, "admin", "changeit"),
	)
	if err != nil {
		t.Fatalf("start the emulator on the suite's ports (2111-2113 must be free): %v", err)
	}
	defer func() { _ = srv.Close() }()
	cmd := exec.Command(goBin, "test", "-count=1", "-json", "-timeout=5m", "-run", pattern, "./esdb")
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"CLUSTER=true", "EVENTSTORE_INSECURE=false",
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go test -run %s: %v after %s", pattern, err, time.Since(start).Round(time.Second))
	res := suiteResults{}
	outputs := map[string]*strings.Builder{}
	var plain strings.Builder // output outside any test (build errors, panics)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			plain.WriteString(sc.Text() + "\n")
			continue
		}
		switch {
		case ev.Action == "output" && ev.Test == "":
			plain.WriteString(ev.Output)
		case ev.Action == "output":
			if outputs[ev.Test] == nil {
				outputs[ev.Test] = &strings.Builder{}
			}
			outputs[ev.Test].WriteString(ev.Output)
		case ev.Action == "pass", ev.Action == "fail", ev.Action == "skip":
			if ev.Test != "" {
				res[ev.Test] = ev.Action
			}
		}
	}
	if len(res) == 0 {
		t.Fatalf("the client's tests did not run (%v):\n%s", err, tail(plain.String(), 60))
	}
	// What failed, in the suite's words.
	var failed strings.Builder
	for _, name := range slices.Sorted(maps.Keys(res)) {
		if res[name] == "fail" && res.leaf(name) && outputs[name] != nil {
			failed.WriteString(outputs[name].String())
		}
	}
	failed.WriteString(plain.String())
	return res, failed.String()
}

// leaf: the test has no subtests.
func (r suiteResults) leaf(name string) bool {
	for other := range r {
		if strings.HasPrefix(other, name+"/") {
			return false
		}
	}
	return true
}

// table counts leaf tests per test file: a subtest belongs to the file
// declaring its group (TestStreams/DeleteTests/… to delete_test.go), a
// top-level test to its own.
func (r suiteResults) table(files map[string]string) string {
	type counts struct{ pass, fail, skip int }
	per := map[string]*counts{}
	for name, action := range r {
		if !r.leaf(name) {
			continue
		}
		parts := strings.Split(name, "/")
		file := files[parts[0]]
		if len(parts) > 1 && files[parts[1]] != "" {
			file = files[parts[1]]
		}
		if file == "" {
			file = "?"
		}
		c := per[file]
		if c == nil {
			c = &counts{}
			per[file] = c
		}
		switch action {
		case "pass":
			c.pass++
		case "fail":
			c.fail++
		case "skip":
			c.skip++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-36s %6s %6s %7s\n", "file", "passed", "failed", "skipped")
	var total counts
	for _, f := range slices.Sorted(maps.Keys(per)) {
		c := per[f]
		fmt.Fprintf(&b, "%-36s %6d %6d %7d\n", f, c.pass, c.fail, c.skip)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
	}
	fmt.Fprintf(&b, "%-36s %6d %6d %7d\n", "total", total.pass, total.fail, total.skip)
	return b.String()
}

// suiteFuncFiles maps each function declared in the suite's _test.go files
// to its file.
func suiteFuncFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files in %s (%v)", dir, err)
	}
	files := map[string]string{}
	fset := token.NewFileSet()
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				files[fn.Name.Name] = filepath.Base(p)
			}
		}
	}
	return files
}

var testFunc = regexp.MustCompile(`^Test[A-Z0-9_]`)

// topLevelTests are the suite's Test functions.
func topLevelTests(files map[string]string) []string {
	var names []string
	for name := range files {
		if testFunc.MatchString(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func tail(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
