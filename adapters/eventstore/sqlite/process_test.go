package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hermes/events"
)

// The real-process tests run this test binary again as a child (see
// TestHelperProcess). The child appends to a store file and prints one line
// per acknowledged append; the parent kills it or waits for it, then checks
// the file against what was acknowledged.
const (
	childModeEnv = "HERMES_EVENTSTORE_CHILD"
	childFileEnv = "HERMES_EVENTSTORE_FILE"
	childNameEnv = "HERMES_EVENTSTORE_CHILD_NAME"
)

// TestHelperProcess is the child side of the real-process tests; run
// directly it does nothing.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		t.Skip("child process of TestCrashSafety, TestTwoProcessesContend and TestPanicWhileCommittingInline")
	}
	path, name := os.Getenv(childFileEnv), os.Getenv(childNameEnv)
	var err error
	switch mode {
	case "crash":
		err = appendUntilKilled(path, name)
	case "contend":
		err = appendWithExpectedVersions(path, name)
	case "panic-inline":
		err = panicWhileCommittingInline(path)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ack is one acknowledged append as the child printed it.
type ack struct {
	stream    string
	ids       []string
	positions []uint64
	versions  []uint64
}

// ackPrinter writes one line per acknowledged append, in one write call: a
// pipe write under PIPE_BUF bytes is atomic, so a kill never leaves half a
// line before a whole one.
type ackPrinter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *ackPrinter) print(stream string, ps []events.Proposed, res events.AppendResult) error {
	ids := make([]string, len(ps))
	for i, pr := range ps {
		ids[i] = pr.ID
	}
	line := fmt.Sprintf("%s %s %s %s\n", stream, strings.Join(ids, ","), joinUints(res.Positions), joinUints(res.Versions))
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(p.w, line)
	return err
}

func joinUints(xs []uint64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(s, ",")
}

func parseUints(s string) ([]uint64, error) {
	var out []uint64
	for f := range strings.SplitSeq(s, ",") {
		x, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func parseAck(line string) (ack, error) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return ack{}, fmt.Errorf("ack line %q: want 4 fields", line)
	}
	a := ack{stream: f[0], ids: strings.Split(f[1], ",")}
	var err error
	if a.positions, err = parseUints(f[2]); err != nil {
		return ack{}, fmt.Errorf("ack line %q: %w", line, err)
	}
	if a.versions, err = parseUints(f[3]); err != nil {
		return ack{}, fmt.Errorf("ack line %q: %w", line, err)
	}
	if len(a.positions) != len(a.ids) || len(a.versions) != len(a.ids) {
		return ack{}, fmt.Errorf("ack line %q: lengths differ", line)
	}
	return a, nil
}

func appendUntilKilled(path, name string) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	out := &ackPrinter{w: os.Stdout}
	errs := make(chan error, 1)
	for g := range 6 {
		go func() {
			for i := 0; ; i++ {
				stream := fmt.Sprintf("lane-%d", (g*7+i)%10)
				ps := make([]events.Proposed, 1+i%3)
				for k := range ps {
					ps[k] = events.Proposed{
						ID:    fmt.Sprintf("%s-g%d-%d-%d", name, g, i, k),
						Event: events.TurnCompleted{TurnID: fmt.Sprint(i), SessionID: name, InputTokens: int64(i), At: t0},
					}
				}
				res, err := s.Append(context.Background(), stream, events.AnyVersion(), ps)
				if err == nil {
					err = out.print(stream, ps, res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	return <-errs
}

func appendWithExpectedVersions(path, name string) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	out := &ackPrinter{w: os.Stdout}
	ctx := context.Background()
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := range 2 {
		wg.Go(func() {
			for i := range 60 {
				stream := fmt.Sprintf("lane-%d", i%3)
				ps := make([]events.Proposed, 1+i%2)
				for k := range ps {
					ps[k] = events.Proposed{ID: fmt.Sprintf("%s-g%d-%d-%d", name, g, i, k), Event: events.Touched{At: t0}}
				}
				for {
					last, err := s.ReadStream(ctx, stream, 0, 1, events.Backwards)
					var version uint64
					switch {
					case errors.Is(err, events.ErrStreamNotFound):
					case err != nil:
						errs <- err
						return
					default:
						version = last[0].Version
					}
					res, err := s.Append(ctx, stream, events.ExactVersion(version), ps)
					if errors.Is(err, events.ErrWrongExpectedVersion) {
						conflicts.Add(1)
						continue
					}
					if err == nil {
						err = out.print(stream, ps, res)
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	fmt.Fprintf(os.Stderr, "%d conflicts retried\n", conflicts.Load())
	return <-errs
}

// child is a running child process and its acknowledged appends.
type child struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func startChild(t *testing.T, mode, path, name string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childFileEnv+"="+path, childNameEnv+"="+name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, out: bufio.NewReader(stdout), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// next returns the next complete ack line; io.EOF when the child's output
// ended (a final line cut by a kill is dropped: it was never acknowledged).
func (c *child) next() (ack, error) {
	line, err := c.out.ReadString('\n')
	if err != nil {
		return ack{}, io.EOF
	}
	return parseAck(strings.TrimSuffix(line, "\n"))
}

// rest reads the child's output to its end.
func (c *child) rest() ([]ack, error) {
	var acks []ack
	for {
		a, err := c.next()
		if errors.Is(err, io.EOF) {
			return acks, nil
		}
		if err != nil {
			return acks, err
		}
		acks = append(acks, a)
	}
}

type placed struct {
	stream   string
	position uint64
	version  uint64
}

// checkFile opens the store file as a restarted server would and checks it
// against the acknowledged appends. It returns the number of stored events.
// The log is checked with plain SQL, without decoding the events, to keep
// the many cycles of TestCrashSafety fast.
func checkFile(t *testing.T, path string, acked map[string]placed) int {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after the child ended: %v", err)
	}
	h, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db := rawDB(t, path)
	defer db.Close()
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v; want ok", integrity, err)
	}
	rows, err := db.Query("SELECT position, stream, version, event_id FROM events ORDER BY position")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]placed{}
	lastVersion := map[string]uint64{}
	var n uint64
	for rows.Next() {
		var p placed
		var id string
		if err := rows.Scan(&p.position, &p.stream, &p.version, &id); err != nil {
			t.Fatal(err)
		}
		n++
		if p.position != n {
			t.Fatalf("event %d has position %d, want contiguous positions", n, p.position)
		}
		if p.version != lastVersion[p.stream]+1 {
			t.Fatalf("stream %s: version %d follows %d, want contiguous versions", p.stream, p.version, lastVersion[p.stream])
		}
		lastVersion[p.stream] = p.version
		stored[id] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if h != n {
		t.Fatalf("Head() = %d with %d events stored, want positions 1..Head", h, n)
	}
	for id, want := range acked {
		if got, ok := stored[id]; !ok || got != want {
			t.Fatalf("acknowledged event %s at %+v: stored %+v (found %v)", id, want, got, ok)
		}
	}
	return int(n)
}

func record(acked map[string]placed, a ack) {
	for i, id := range a.ids {
		acked[id] = placed{a.stream, a.positions[i], a.versions[i]}
	}
}

// TestCrashSafety SIGKILLs a child that appends from several goroutines, at
// random points, and checks after each kill that the file opens cleanly and
// holds every acknowledged append where it was acknowledged.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process test")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "events.db")
	acked := map[string]placed{}
	const cycles = 24
	for cycle := range cycles {
		c := startChild(t, "crash", path, fmt.Sprintf("c%d", cycle))
		// Some kills land while the child is still opening the file.
		killAfter := 0
		if cycle%6 != 0 {
			killAfter = 1 + rng.IntN(200)
		}
		for range killAfter {
			a, err := c.next()
			if err != nil {
				_ = c.cmd.Wait()
				t.Fatalf("cycle %d: child ended early: %v; stderr:\n%s", cycle, err, c.stderr)
			}
			record(acked, a)
		}
		if err := c.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		rest, err := c.rest()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rest {
			record(acked, a)
		}
		_ = c.cmd.Wait()
		n := checkFile(t, path, acked)
		t.Logf("cycle %d: killed after %d acks read; %d events stored, %d acknowledged", cycle, killAfter, n, len(acked))
	}
}

// TestTwoProcessesContend runs two children that append to the same streams
// with expected versions, each re-reading and retrying on a conflict: no
// stream may fork, and the file must hold exactly the acknowledged appends.
func TestTwoProcessesContend(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process test")
	}
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	children := []*child{startChild(t, "contend", path, "a"), startChild(t, "contend", path, "b")}
	acked := map[string]placed{}
	outputs := make([][]ack, len(children))
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() { outputs[i], errs[i] = c.rest() })
	}
	wg.Wait()
	for i, c := range children {
		if errs[i] != nil {
			t.Fatalf("child %d output: %v", i, errs[i])
		}
		for _, a := range outputs[i] {
			record(acked, a)
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v; stderr:\n%s", i, err, c.stderr)
		}
		t.Logf("child %d: %s", i, strings.TrimSpace(c.stderr.String()))
	}
	const want = 2 * 2 * (30*1 + 30*2)
	if len(acked) != want {
		t.Fatalf("%d events acknowledged, want %d", len(acked), want)
	}
	if n := checkFile(t, path, acked); n != len(acked) {
		t.Errorf("%d events stored, want the %d acknowledged", n, len(acked))
	}
}
