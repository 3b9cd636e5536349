package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/node"
	"hermes/testfixtures/ondisk"
)

// readLogFile reads every event of the log file at path (read-only).
func readLogFile(t *testing.T, path string) []events.Envelope {
	t.Helper()
	st, err := sqlite.Open(path, sqlite.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var all []events.Envelope
	for after := uint64(0); ; {
		batch, err := st.ReadAll(context.Background(), after, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			return all
		}
		all = append(all, batch...)
		after = batch[len(batch)-1].Position
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedLog garbles the log of a stopped server: damage at its tail
// makes the start refuse, naming the damage and the way out; damage in its
// middle is found by hermes check, which names the damaged positions, and
// --salvage copies exactly the other events, unchanged.
func TestDamagedLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("tail: start refuses", func(t *testing.T) {
		home := t.TempDir()
		seedHome(t, home, 3)
		h := node.Home{Dir: home}
		ondisk.Garble(t, h.EventsDB(), 0) // the last third: the newest events
		s := startServerExpectExit(t, home)
		for _, want := range []string{"damaged", "hermes check", "hermes restore"} {
			if !strings.Contains(s, want) {
				t.Fatalf("refusal does not say %q:\n%s", want, s)
			}
		}
	})
	t.Run("middle: check names the positions, salvage copies the rest", func(t *testing.T) {
		home := t.TempDir()
		seedHome(t, home, 8)
		h := node.Home{Dir: home}
		pristine := filepath.Join(t.TempDir(), "pristine.db")
		copyFile(t, h.EventsDB(), pristine)
		before := readLogFile(t, pristine)
		garbleRange(t, h.EventsDB(), 0.4, 0.5)

		salvaged := filepath.Join(t.TempDir(), "salvaged.db")
		out, _ := hermes(t, 1, "check", "--home", home, "--salvage", salvaged)
		if !strings.Contains(out, "damaged positions") && !strings.Contains(out, "integrity check: ") {
			t.Fatalf("check output:\n%s", out)
		}
		t.Logf("hermes check:\n%s", out)
		rep, err := sqlite.Check(context.Background(), h.EventsDB(), sqlite.CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatalf("check found nothing in a garbled log")
		}
		damaged := func(pos uint64) bool {
			for _, r := range rep.Damaged() {
				if pos >= r.From && pos <= r.To {
					return true
				}
			}
			return false
		}
		undecodable := map[uint64]bool{}
		for _, p := range rep.Problems {
			if strings.Contains(p.What, "does not decode") {
				undecodable[p.Position] = true
			}
		}
		var want []events.Envelope
		for _, e := range before {
			if !damaged(e.Position) && !undecodable[e.Position] {
				want = append(want, e)
			}
		}
		got := readLogFile(t, salvaged)
		if len(got) != len(want) {
			t.Fatalf("salvaged %d events, want the %d outside the damaged positions %v", len(got), len(want), rep.Damaged())
		}
		for i := range got {
			if got[i].Position != want[i].Position || got[i].ID != want[i].ID || got[i].Stream != want[i].Stream || got[i].Version != want[i].Version {
				t.Fatalf("salvaged event %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		// Every position outside the reported ranges was read: the
		// ranges are exact.
		if n := uint64(len(got)) + uint64(len(undecodable)); n+damagedCount(rep.Damaged()) != before[len(before)-1].Position {
			t.Fatalf("salvaged %d + undecodable %d + damaged %d != head %d", len(got), len(undecodable), damagedCount(rep.Damaged()), before[len(before)-1].Position)
		}
	})
}

func damagedCount(rs []sqlite.Range) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.To - r.From + 1
	}
	return n
}

// garbleRange overwrites the pages between the fractions from and to of
// the file with random bytes.
func garbleRange(t *testing.T, path string, from, to float64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	pages := st.Size() / 4096
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	for p := max(2, int64(float64(pages)*from)); p <= int64(float64(pages)*to); p++ {
		if _, err := f.WriteAt(junk, (p-1)*4096); err != nil {
			t.Fatal(err)
		}
	}
}

// startServerExpectExit starts hermes serve on home and returns its stderr
// once it exited, failing the test if it became ready or exited 0.
func startServerExpectExit(t *testing.T, home string) string {
	t.Helper()
	stdout, stderr := hermes(t, 1, "serve", "--home", home, "--addr", freeAddr(t))
	return stdout + stderr
}

// TestBackupUnderLoad takes a backup while 64 clients append over
// loopback HTTP, restores it into a new home, and checks that every event
// acknowledged before the backup started is there, the read models match a
// rebuild and the positions are contiguous.
func TestBackupUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	home := t.TempDir()
	s := startServer(t, home, nil)
	const clients = 64
	type acked struct {
		pos uint64
		at  time.Time
	}
	var mu sync.Mutex
	var acks []acked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var r resolved
			if s.try("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("load%d", c), "chat_type": "dm"}}, &r) != nil {
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var m struct {
					Position uint64 `json:"position"`
				}
				if s.try("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": fmt.Sprintf("client %d message %d", c, i)}, &m) != nil {
					return
				}
				mu.Lock()
				acks = append(acks, acked{m.Position, time.Now()})
				mu.Unlock()
			}
		})
	}
	// Let the load build up (bounded), then back up.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 500 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	backupStart := time.Now()
	out, _ := hermes(t, 0, "backup", filepath.Join(t.TempDir(), "backups"), "--home", home)
	close(stop)
	wg.Wait()
	t.Logf("%s(%d appends acknowledged in all)", out, len(acks))
	dir := strings.Fields(out[strings.Index(out, " to ")+4:])[0]
	dir = strings.TrimSuffix(dir, ":")
	for _, name := range []string{"events.db", "manifest.json"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("backup dir mode %v, want 0700", st.Mode().Perm())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop = %d", code)
	}

	restored := t.TempDir()
	hermes(t, 0, "restore", dir, "--home", restored)
	log := readLogFile(t, node.Home{Dir: restored}.EventsDB())
	have := map[uint64]bool{}
	for i, e := range log {
		have[e.Position] = true
		if e.Position != uint64(i+1) {
			t.Fatalf("restored log: event %d at position %d, positions not contiguous", i, e.Position)
		}
	}
	before := 0
	for _, a := range acks {
		if a.at.Before(backupStart) {
			before++
			if !have[a.pos] {
				t.Fatalf("position %d acknowledged before the backup started is not in the restored log (head %d)", a.pos, len(log))
			}
		}
	}
	if before == 0 {
		t.Fatal("no append was acknowledged before the backup")
	}
	var m node.Manifest
	data, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Events != uint64(len(log)) || m.HeadPosition != uint64(len(log)) {
		t.Fatalf("manifest %+v, restored log has %d events", m, len(log))
	}
	out, _ = hermes(t, 0, "projections", "verify", "--home", restored)
	if !strings.Contains(out, "ok") {
		t.Fatalf("verify: %s", out)
	}
	out, _ = hermes(t, 0, "check", "--home", restored)
	if !strings.Contains(out, "ok: the event log is intact") {
		t.Fatalf("check: %s", out)
	}
	// The restored home serves.
	s2 := startServer(t, restored, nil)
	s2.stop(syscall.SIGTERM)
	// A non-empty home is refused without --force.
	_, errOut := hermes(t, 2, "restore", dir, "--home", restored)
	if !strings.Contains(errOut, "--force") {
		t.Fatalf("restore into a non-empty home: %s", errOut)
	}
	hermes(t, 0, "restore", dir, "--home", restored, "--force")
	// A damaged backup is refused.
	f, _ := os.OpenFile(filepath.Join(dir, "events.db"), os.O_RDWR, 0)
	f.WriteAt([]byte("x"), 5000)
	f.Close()
	_, errOut = hermes(t, 1, "restore", dir, "--home", t.TempDir())
	if !strings.Contains(errOut, "does not match its manifest") {
		t.Fatalf("restore of a damaged backup: %s", errOut)
	}
}

// TestPeriodicBackup: with backup.interval_seconds, hermes serve takes
// snapshots and keeps backup.keep of them.
func TestPeriodicBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "snapshots")
	s := startServer(t, home, []string{"HERMES_BACKUP_INTERVAL_SECONDS=0.2", "HERMES_BACKUP_KEEP=2", "HERMES_BACKUP_DIR=" + dir})
	var r resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": "p", "chat_type": "dm"}}, &r)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.stderr.String(), "deleted a backup past backup.keep") {
		if time.Now().After(deadline) {
			t.Fatalf("no backup pruned after 60s:\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop(syscall.SIGTERM)
	got, _ := filepath.Glob(filepath.Join(dir, "hermes-*", "manifest.json"))
	if len(got) != 2 {
		t.Fatalf("%d backups kept, want 2: %v", len(got), got)
	}
	hermes(t, 0, "restore", filepath.Dir(got[1]), "--home", t.TempDir())

	// Given the folder given to hermes backup, restore takes the newest
	// complete backup in it and says which; a later folder whose manifest
	// was never written is passed over.
	unfinished := filepath.Join(dir, "hermes-29991231T000000.000Z")
	if err := os.Mkdir(unfinished, 0o700); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(filepath.Dir(got[1]), node.BackupLogName), filepath.Join(unfinished, node.BackupLogName))
	out, _ := hermes(t, 0, "restore", dir, "--home", t.TempDir())
	if !strings.Contains(out, "holds 2 backups; restoring the newest complete one: "+filepath.Dir(got[1])) {
		t.Fatalf("restore %s: %s", dir, out)
	}

	// A folder without any backup is a clear refusal.
	_, errOut := hermes(t, 2, "restore", t.TempDir(), "--home", t.TempDir())
	if !strings.Contains(errOut, "holds no hermes backup") {
		t.Fatalf("restore of a folder without backups: %s", errOut)
	}
}
