package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestWriterPageCacheIsBounded: the writer's connection caches at most
// 2 MiB of pages (SQLite's cache_size in KiB, negative). Each cached page
// costs about twice its size resident, and the writer's was the biggest
// cache of the server.
func TestWriterPageCacheIsBounded(t *testing.T) {
	// Given an open store
	s, err := Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// When the writer's connection is asked for its cache size
	var kib int64
	if err := s.w.conn.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&kib); err != nil {
		t.Fatal(err)
	}

	// Then it is 2 MiB
	if kib != -2048 {
		t.Fatalf("writer cache_size = %d, want -2048 (KiB)", kib)
	}
}
