// Package ondisk holds what erasure and healing tests share to look at
// SQLite files as the bytes on disk: a bare WAL checkpoint on a connection
// of its own (the purge as it was before hermes scrubbed free space, the
// control that shows a check can fail), a search of a file's bytes or of a
// whole home's, random markers to search for, and damage done to a file's
// pages. It imports nothing of hermes, so any package's internal tests can
// use it.
package ondisk

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io/fs"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// BareCheckpoint copies the WAL of the SQLite file at path into the file
// and truncates it, on a connection of its own, and nothing else.
func BareCheckpoint(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("wal_checkpoint(TRUNCATE) = busy %d, %v", busy, err)
	}
}

// Holds reports whether any byte run of the file at path is one of
// needles; a file that does not exist holds nothing.
func Holds(t *testing.T, path string, needles ...[]byte) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, n := range needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// RandomMarker is prefix followed by 24 random hex digits: content no file
// holds by chance.
func RandomMarker(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// FilesHolding lists the regular files under root (slash paths relative to
// it) whose bytes hold marker. It may run while a server writes there: a
// file replaced by rename while the walk runs (sessions.json) is skipped.
func FilesHolding(t *testing.T, root, marker string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			rel, _ := filepath.Rel(root, path)
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Garble overwrites pages of the SQLite file at path with random bytes:
// from page first (1 is the header page; 0: two thirds of the way in, past
// the pages of the schema, written first) to the last.
func Garble(t *testing.T, path string, first int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := int(st.Size() / page)
	last := pages
	if first == 0 {
		first = max(2, 2*pages/3)
	}
	if pages < first+2 {
		t.Fatalf("%s has %d pages, too few to garble from page %d", path, pages, first)
	}
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	junk := make([]byte, page)
	for p := first; p <= last; p++ {
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(junk, int64(p-1)*page); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// DamageLeafHeader overwrites the header of the middle leaf page of the
// b-tree named tree (as DamageLeaf names it): the first read of that page,
// by any statement, fails with SQLITE_CORRUPT ("database disk image is
// malformed"); pages read before stay in their readers' caches.
func DamageLeafHeader(t *testing.T, path, tree string) {
	t.Helper()
	page, pageSize := middleLeaf(t, path, tree)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 12), (page-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// DamageLeaf overwrites 32 bytes in the middle of the middle leaf page of
// the b-tree named tree (a table or index of the SQLite file at path, as
// dbstat names it): the cell content changes, the page's header does not,
// so neither a read of other pages nor an INSERT notices.
func DamageLeaf(t *testing.T, path, tree string) {
	t.Helper()
	page, pageSize := middleLeaf(t, path, tree)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := bytes.Repeat([]byte{0xA5}, 32)
	if _, err := f.WriteAt(junk, (page-1)*pageSize+pageSize/2); err != nil {
		t.Fatal(err)
	}
}

// middleLeaf is the page number of the middle leaf page of tree, and the
// file's page size.
func middleLeaf(t *testing.T, path, tree string) (page, pageSize int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages []int64
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", tree)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
	}
	rows.Close()
	if len(pages) < 3 {
		t.Fatalf("%s has %d leaf pages, want a middle one", tree, len(pages))
	}
	return pages[len(pages)/2], pageSize
}
