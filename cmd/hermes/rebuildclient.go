package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"hermes/api"
	"hermes/node"
	"hermes/projections"
)

// rebuildPoll is how often the CLI asks a live rebuild how far it is.
const rebuildPoll = 200 * time.Millisecond

// rebuildPollFailures bounds the consecutive failed status requests before
// the CLI gives up (the rebuild itself goes on in the server).
const rebuildPollFailures = 25

// rebuildLive asks the hermes serve that holds h to rebuild its read models
// while it serves, and shows the progress until the swap.
func rebuildLive(ctx context.Context, g *globalFlags, h node.Home, server string, stderr io.Writer) error {
	cfg, _, err := loadConfig(g, nil)
	if err != nil {
		return err
	}
	if server == "" {
		server = "http://" + cfg.API.Addr
		if b, err := os.ReadFile(h.ServeAddr()); err == nil && len(bytes.TrimSpace(b)) > 0 {
			server = "http://" + string(bytes.TrimSpace(b))
		}
	}
	c := rebuildClient{base: strings.TrimSuffix(server, "/"), token: cfg.API.Token, http: &http.Client{Timeout: 30 * time.Second}}
	st, err := c.do(ctx, http.MethodPost, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("hermes serve holds %s; asking it to rebuild live: %w", h.Dir, err)
	}
	fmt.Fprintf(stderr, "hermes serve holds %s: rebuilding live at %s (run %d); the API keeps serving\n", h.Dir, c.base, st.Run)
	var mu sync.Mutex
	last := st
	stopBar := drawRebuild(stderr, func() projections.RebuildStatus {
		mu.Lock()
		defer mu.Unlock()
		return last
	})
	failures := 0
	for st.Running() {
		select {
		case <-ctx.Done():
			stopBar()
			return fmt.Errorf("stopped watching; the rebuild goes on in hermes serve (GET %s/v1/projections/rebuild): %w", c.base, ctx.Err())
		case <-time.After(rebuildPoll):
		}
		next, err := c.do(ctx, http.MethodGet, http.StatusOK)
		if err != nil {
			if failures++; failures >= rebuildPollFailures {
				stopBar()
				return fmt.Errorf("lost hermes serve during the rebuild: %w", err)
			}
			continue
		}
		failures = 0
		if next.Run != st.Run {
			stopBar()
			return fmt.Errorf("hermes serve reports rebuild run %d, not ours (%d): was it restarted?", next.Run, st.Run)
		}
		st = next
		mu.Lock()
		last = st
		mu.Unlock()
	}
	stopBar()
	if st.Phase == projections.RebuildFailed {
		return fmt.Errorf("the rebuild failed in hermes serve; the old read models serve on: %s", st.Err)
	}
	took := st.FinishedAt.Sub(st.StartedAt)
	fmt.Fprintf(stderr, "rebuilt the read models live up to position %d in %s (%.0f events/s while serving) and swapped them in\n",
		st.Total, took.Round(time.Millisecond), float64(st.Total)/max(took.Seconds(), 1e-3))
	return nil
}

// rebuildClient calls the rebuild routes of a hermes serve.
type rebuildClient struct {
	base, token string
	http        *http.Client
}

// do sends method to /v1/projections/rebuild and decodes the status; an
// answer other than want is an error that quotes the server's.
func (c rebuildClient) do(ctx context.Context, method string, want int) (projections.RebuildStatus, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/v1/projections/rebuild", body)
	if err != nil {
		return projections.RebuildStatus{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return projections.RebuildStatus{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return projections.RebuildStatus{}, fmt.Errorf("%s %s: %w", method, req.URL, err)
	}
	if resp.StatusCode != want {
		var e api.ErrorBody
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			return projections.RebuildStatus{}, fmt.Errorf("%s %s: %d %s: %s", method, req.URL, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return projections.RebuildStatus{}, fmt.Errorf("%s %s: %d %s", method, req.URL, resp.StatusCode, bytes.TrimSpace(data))
	}
	var r api.RebuildStatusResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return projections.RebuildStatus{}, fmt.Errorf("%s %s: decode %q: %w", method, req.URL, data, err)
	}
	st := projections.RebuildStatus{Run: r.Run, Phase: projections.RebuildPhase(r.Phase), Done: r.Done, Total: r.Total,
		EventsPerSecond: r.EventsPerSecond, ETA: time.Duration(r.ETASeconds * float64(time.Second)), Restarts: r.Restarts}
	if r.StartedAt != nil {
		st.StartedAt = *r.StartedAt
	}
	if r.FinishedAt != nil {
		st.FinishedAt = *r.FinishedAt
	}
	if r.Error != nil {
		st.Err = *r.Error
	}
	return st, nil
}

// drawRebuild shows a rebuild's progress on w until the returned stop is
// called: a progress bar with the phase, events/s and ETA on a terminal,
// one line per phase otherwise.
func drawRebuild(w io.Writer, status func() projections.RebuildStatus) (stop func()) {
	f, ok := w.(*os.File)
	terminal := ok && isTerminal(f)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var bar *progressbar.ProgressBar
		var phase projections.RebuildPhase
		draw := func() {
			st := status()
			if !terminal {
				if st.Phase != phase && st.Running() {
					fmt.Fprintf(w, "rebuild: %s\n", st.Phase)
				}
				phase = st.Phase
				return
			}
			if st.Total == 0 {
				return
			}
			if bar == nil {
				bar = progressbar.NewOptions64(int64(st.Total), progressbar.OptionSetWriter(w),
					progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
			}
			bar.ChangeMax64(int64(st.Total))
			desc := fmt.Sprintf("%-11s %7.0f events/s", st.Phase, st.EventsPerSecond)
			if st.ETA > 0 {
				desc += fmt.Sprintf(" ETA %s", st.ETA.Round(time.Second))
			}
			bar.Describe(desc)
			bar.Set64(int64(min(st.Done, st.Total)))
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				if bar != nil {
					bar.Finish()
				}
				return
			case <-t.C:
				draw()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}
