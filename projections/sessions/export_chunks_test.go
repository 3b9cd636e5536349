package sessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"hermes/projections/sessions"
)

// Given nine lanes, when sessions.json is written a chunk of lanes at a
// time (chunks of 1, 2, 3 — the last chunk full, then an empty one — and
// 4), then the file is byte for byte the one a single read writes, with
// every lane once, in key order.
func TestSessionsJSONInChunksEqualsOneRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.json")
	p, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{SessionsJSON: path})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resolveLanes(t, p, 100, 9)
	export := func(chunk int) []byte {
		defer sessions.SetExportChunk(chunk)()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	whole := export(1000)
	var parsed map[string]json.RawMessage
	if err := json.Unmarshal(whole, &parsed); err != nil || len(parsed) != 10 {
		t.Fatalf("sessions.json holds %d keys (%v), want the _README and 9 lanes", len(parsed), err)
	}
	for _, chunk := range []int{1, 2, 3, 4} {
		if got := export(chunk); !bytes.Equal(got, whole) {
			t.Errorf("written in chunks of %d:\n%s\nwant\n%s", chunk, got, whole)
		}
	}
}
