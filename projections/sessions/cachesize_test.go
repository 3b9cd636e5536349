package sessions

import (
	"context"
	"path/filepath"
	"testing"
)

// TestEveryConnectionHasTheBoundedPageCache: every pooled connection to
// lanes.db, not only the first, caches at most cacheKiB of pages. The
// writer, the query reader and the export reader are open at once under
// load, and a cached page costs about twice its size resident.
func TestEveryConnectionHasTheBoundedPageCache(t *testing.T) {
	// Given an open read model
	p, err := Open(filepath.Join(t.TempDir(), "lanes.db"), Exports{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()

	// When three connections are held at once
	for i := range 3 {
		conn, err := p.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var kib int64
		if err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&kib); err != nil {
			t.Fatal(err)
		}

		// Then each caches at most cacheKiB
		if kib != -cacheKiB {
			t.Fatalf("connection %d: cache_size = %d, want %d (KiB)", i, kib, -cacheKiB)
		}
	}
}
