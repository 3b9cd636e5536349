package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// searchWords are the words of the seeded messages; every search for one of
// them must answer the same before, during and after a rebuild.
var searchWords = []string{"amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath"}

// seedLanes writes lanes×messages messages over 8 connections and returns
// each lane's source and session id.
func seedLanes(t *testing.T, s *testNode, lanes, messages int) (sources []map[string]any, ids []string) {
	t.Helper()
	sources, ids = make([]map[string]any, lanes), make([]string, lanes)
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	sem := make(chan struct{}, 8)
	for i := range lanes {
		sources[i] = map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("live%d", i), "chat_type": "dm"}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var r resolved
			if status, err := s.request("POST", "/v1/sessions/resolve", map[string]any{"source": sources[i]}, &r); err != nil || status != 200 {
				errs <- fmt.Errorf("resolve lane %d = %d, %v", i, status, err)
				return
			}
			ids[i] = r.Entry.SessionID
			for j := range messages {
				text := fmt.Sprintf("%s and %s, note %d of lane %d", searchWords[(i+j)%len(searchWords)], searchWords[(3*i+j/2)%len(searchWords)], j, i)
				if status, err := s.request("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": text}, nil); err != nil || status != 200 {
					errs <- fmt.Errorf("append to lane %d = %d, %v", i, status, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return sources, ids
}

// TestErasureDuringLiveRebuild erases a transcript while a live rebuild is
// copying history that holds it (the copy is held there, in-process): the
// erasing call answers only once the copy is gone, no file under the home
// holds the erased marker then, nor after the rebuild, which started over
// and swapped in. The check can fail: while held, the copy holds the marker.
func TestErasureDuringLiveRebuild(t *testing.T) {
	home := t.TempDir()
	marker := ondisk.RandomMarker(t, "rmark")
	held := make(chan struct{})
	var once sync.Once
	s := startNode(t, home, func(n *Node) {
		n.rt.rebuilds.buildHook = func(ctx context.Context, attempt int, done, total uint64) {
			if attempt == 1 && done >= total { // both read models hold the whole copy
				once.Do(func() { close(held) })
				<-ctx.Done() // until the erasure's purge cancels the copy
			}
		}
	})
	_, ids := seedLanes(t, s, 4, 10)
	s.must("POST", "/v1/transcripts/"+ids[0]+"/messages", map[string]any{"role": "user", "content": "remember " + marker}, nil)
	for _, f := range ondisk.FilesHolding(t, home, marker) {
		if strings.Contains(f, RebuildScratchPrefix) {
			t.Fatalf("the marker is in the scratch directory before any rebuild: %s", f)
		}
	}
	var st struct {
		Run      int    `json:"run"`
		Phase    string `json:"phase"`
		Restarts int    `json:"restarts"`
	}
	if status := s.call("POST", "/v1/projections/rebuild", map[string]any{}, &st); status != http.StatusAccepted {
		t.Fatalf("POST /v1/projections/rebuild = %d", status)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the rebuild never reported progress")
	}
	inScratch := false
	for _, f := range ondisk.FilesHolding(t, home, marker) {
		inScratch = inScratch || strings.Contains(f, RebuildScratchPrefix)
	}
	if !inScratch {
		t.Fatal("the held copy does not hold the marker: the test cannot tell a purge from no copy")
	}
	if status := s.call("POST", "/v1/projections/rebuild", map[string]any{}, nil); status != http.StatusConflict {
		t.Errorf("a second POST /v1/projections/rebuild = %d, want 409", status)
	}
	var delOut json.RawMessage
	if status := s.call("DELETE", "/v1/transcripts/"+ids[0], nil, &delOut); status != http.StatusOK {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("DELETE = %d %s", status, delOut)
	}
	if found := ondisk.FilesHolding(t, home, marker); len(found) > 0 {
		t.Errorf("after the erasure answered, the marker is still in %v", found)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s.must("GET", "/v1/projections/rebuild", nil, &st)
		if st.Phase == "done" || st.Phase == "failed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Phase != "done" || st.Restarts != 1 {
		t.Fatalf("rebuild = %+v, want done after 1 restart", st)
	}
	if found := ondisk.FilesHolding(t, home, marker); len(found) > 0 {
		t.Errorf("after the rebuild, the marker is in %v", found)
	}
	var raw json.RawMessage
	if status := s.call("GET", "/v1/transcripts/"+ids[0], nil, &raw); status != http.StatusNotFound {
		t.Errorf("GET the erased transcript after the swap = %d %s, want 404", status, raw)
	}
}

// TestCheckRebuildSpace: a rebuild is refused (insufficient storage) unless
// the file system can hold new read models beside the ones in use.
func TestCheckRebuildSpace(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	const size = 10 << 20
	for _, p := range []string{h.LanesDB(), h.StateDB()} {
		if err := os.WriteFile(p, make([]byte, size/2), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		free    uint64
		refused bool
	}{
		{name: "plenty", free: 1 << 30},
		{name: "just enough", free: size + size/5 + rebuildHeadroom},
		{name: "less than the read models in use", free: size / 2, refused: true},
		{name: "no headroom", free: size + size/5, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRebuildSpace(h, func(string) (uint64, error) { return tt.free, nil })
			if refused := errors.Is(err, events.ErrStorageFull); refused != tt.refused {
				t.Errorf("checkRebuildSpace with %d bytes free = %v, want refused %v", tt.free, err, tt.refused)
			}
		})
	}
}
