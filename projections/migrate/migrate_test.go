package migrate

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestRun_refusesABadPlan: steps must be numbered 1, 2, … with a name and
// an Up, and a plan needs a record table; a bad plan touches nothing.
func TestRun_refusesABadPlan(t *testing.T) {
	up := SQL("CREATE TABLE t (x)")
	for _, tc := range []struct {
		name string
		plan Plan
	}{
		{"no table", Plan{Steps: []Step{{1, "t", up}}}},
		{"starts at 2", Plan{Table: "m", Steps: []Step{{2, "t", up}}}},
		{"a gap", Plan{Table: "m", Steps: []Step{{1, "t", up}, {3, "u", up}}}},
		{"no name", Plan{Table: "m", Steps: []Step{{1, "", up}}}},
		{"no up", Plan{Table: "m", Steps: []Step{{1, "t", nil}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, _, err := Run(context.Background(), conn, tc.plan); err == nil {
				t.Fatalf("Run(%s) = nil, want an error", tc.name)
			}
			var objects int
			if err := conn.QueryRowContext(context.Background(), "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil || objects != 0 {
				t.Errorf("after Run(%s): %d schema objects, %v; want none", tc.name, objects, err)
			}
		})
	}
}
