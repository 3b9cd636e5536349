package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
)

// smallTablespace mounts a small tmpfs, makes it a tablespace of the
// shared cluster, and returns the tablespace's name and a function that
// resizes the file system. It skips t where that cannot be done (an
// external server, not root, no mount).
func smallTablespace(t *testing.T, size string) (name string, resize func(size string)) {
	t.Helper()
	cluster := pgtest.Shared(t)
	if cluster.External() || os.Geteuid() != 0 {
		t.Skip("a full disk is made with a small tmpfs tablespace, which needs root and the tests' own cluster")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to own the tablespace: %v", err)
	}
	mnt, err := os.MkdirTemp("", "hermes-pg-full-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		os.Remove(mnt)
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	dir := filepath.Join(mnt, "ts")
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := errors.Join(os.Mkdir(dir, 0o700), os.Chown(dir, uid, gid)); err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("small_%d", schemas.Add(1))
	admin := func(sql string) error {
		conn, err := pgx.Connect(context.Background(), cluster.URL())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), sql)
		return err
	}
	if err := admin("CREATE TABLESPACE " + name + " LOCATION '" + dir + "'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin("DROP TABLESPACE IF EXISTS " + name); err != nil {
			t.Errorf("drop tablespace: %v", err)
		}
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
		os.Remove(mnt)
	})
	return name, func(size string) {
		if out, err := exec.Command("mount", "-o", "remount,size="+size, mnt).CombinedOutput(); err != nil {
			t.Fatalf("resize %s: %v %s", mnt, err, out)
		}
	}
}

// TestStorageFull: on a full disk (the server's disk_full) an append fails
// with events.ErrStorageFull and appends nothing; the events before it
// stay; the same append succeeds once there is space again.
func TestStorageFull(t *testing.T) {
	ts, resize := smallTablespace(t, "2m")
	u, err := url.Parse(tempSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_tablespace", ts) // the schema's tables go there
	u.RawQuery = q.Encode()
	s := openAt(t, u.String())
	noise := make([]byte, 30<<10)
	event := func(i int) []events.Proposed {
		_, _ = rand.Read(noise) // incompressible, so TOAST stores it all
		return []events.Proposed{{ID: fmt.Sprintf("e-%d", i), Event: events.TitleSet{SessionID: "s", Title: hex.EncodeToString(noise), At: t0}}}
	}
	var last events.AppendResult
	var full []events.Proposed
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1000 appends of 60 kB fitted in a 2 MB tablespace")
		}
		ps := event(i)
		res, err := s.Append(t.Context(), "transcript-s", events.ExactVersion(uint64(i)), ps)
		if err == nil {
			last = res
			continue
		}
		if !errors.Is(err, events.ErrStorageFull) {
			t.Fatalf("append %d error = %v, want ErrStorageFull", i, err)
		}
		full = ps
		break
	}
	if h, err := s.Head(t.Context()); err != nil || h != last.LastPosition() {
		t.Fatalf("Head() after the refused append = %d, %v; want %d", h, err, last.LastPosition())
	}
	envs, err := s.ReadStream(t.Context(), "transcript-s", 1, 10000, events.Forwards)
	if err != nil || uint64(len(envs)) != last.LastVersion() {
		t.Fatalf("ReadStream = %d events, %v; want the %d appended before the disk was full", len(envs), err, last.LastVersion())
	}
	resize("64m")
	res, err := s.Append(t.Context(), "transcript-s", events.ExactVersion(last.LastVersion()), full)
	if err != nil || res.Duplicate || res.LastVersion() != last.LastVersion()+1 {
		t.Fatalf("the same append with space again = %+v, %v; want it appended at version %d", res, err, last.LastVersion()+1)
	}
}
