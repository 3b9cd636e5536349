package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"hermes/events"
)

// Defaults of the event stream limits (Deps).
const (
	DefaultMaxFollowers         = 64
	DefaultFollowerBufferBytes  = 1 << 20
	DefaultFollowerWriteTimeout = 30 * time.Second
)

// retryFollowAfter is the Retry-After of a refused event stream, in seconds.
const retryFollowAfter = "5"

// droppedReason is the reason of the dropped event.
const droppedReason = "too far behind"

// droppedEvent is the data of the last event of a stream whose client fell
// more than api.follower_buffer_bytes behind: from_position ResumeFrom (or
// Last-Event-ID, which the event's id sets) continues with no gap.
type droppedEvent struct {
	Reason      string `json:"reason"`
	ResumeFrom  uint64 `json:"resume_from"`
	BufferBytes int    `json:"buffer_bytes"`
}

// followEvents streams the log as Server-Sent Events from from_position
// (inclusive) on, or after the Last-Event-ID header.
//
// At most Deps.MaxFollowers streams are open at once; one more is refused
// with 503 unavailable and Retry-After. Each stream holds at most
// Deps.FollowerBufferBytes of encoded events for its client: a client that
// does not keep up (the socket is full, the buffer fills) is dropped with a
// last event
//
//	id: <position of the last event queued>
//	event: dropped
//	data: {"reason":"too far behind","resume_from":<position>,"buffer_bytes":<bound>}
//
// after the events queued before it, and reconnects from resume_from. Every
// write must finish within Deps.FollowerWriteTimeout, so a peer that stops
// reading cannot hold the stream's goroutine.
//
// It returns an error only before the stream starts; once the 200 is sent
// it ends quietly.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request, from uint64) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errors.New("streaming unsupported")
	}
	after := uint64(0)
	if from > 0 {
		after = from - 1
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if n, err := strconv.ParseUint(id, 10, 64); err == nil {
			after = n
		}
	}
	if n := s.followers.Add(1); n > int64(s.MaxFollowers) {
		s.followers.Add(-1)
		w.Header().Set("Retry-After", retryFollowAfter)
		return fmt.Errorf("%w: %d event streams are open, the most api.max_followers allows; retry later", errUnavailable, s.MaxFollowers)
	}
	defer s.followers.Add(-1)
	sub, err := s.Store.Subscribe(r.Context(), after)
	if err != nil {
		return fmt.Errorf("subscribe after %d: %w", after, err)
	}
	q := newFollowerQueue(s.FollowerBufferBytes, after)
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		s.pump(sub, q, r.RemoteAddr)
	}()
	defer func() {
		sub.Close()
		<-pumped
	}()
	if s.Metrics != nil {
		s.Metrics.streams.Inc()
		defer s.Metrics.streams.Dec()
	}

	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		// A wrapper of w without Unwrap hides the connection.
		s.log.Warn("event stream without a write deadline: a stuck client holds it", "err", err)
	}
	// write sends p within the write timeout; false when the client is gone
	// or stuck.
	write := func(p []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(s.FollowerWriteTimeout))
		if _, err := w.Write(p); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !write([]byte(": hermes event stream\n\n")) {
		return nil
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.streamsDone:
			return nil
		case <-heartbeat.C:
			if !write([]byte(": keep-alive\n\n")) {
				return nil
			}
			continue
		case <-q.ready:
		}
		batch := q.take()
		if len(batch.frames) > 0 {
			ok := write(joinFrames(batch.frames, batch.size))
			q.release(batch.size)
			if !ok {
				return nil
			}
		}
		switch {
		case batch.dropped:
			data, _ := json.Marshal(droppedEvent{Reason: droppedReason, ResumeFrom: batch.resumeFrom, BufferBytes: s.FollowerBufferBytes})
			write(fmt.Appendf(nil, "id: %d\nevent: dropped\ndata: %s\n\n", batch.lastQueued, data))
			return nil
		case batch.ended:
			return nil
		}
	}
}

// pump moves the subscription's events into q, encoded, until q is full
// (the client is too far behind: q is marked dropped and the subscription
// closed, which frees its read-ahead) or the subscription ends.
func (s *Server) pump(sub events.Subscription, q *followerQueue, remote string) {
	for env := range sub.Events() {
		data, err := json.Marshal(NewEnvelope(env))
		if err != nil {
			s.log.Error("encode event", "position", env.Position, "err", err)
			q.end()
			return
		}
		frame := fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", env.Position, env.Type, data)
		if !q.push(frame, env.Position) {
			sub.Close()
			if s.Metrics != nil {
				s.Metrics.streamsDropped.Inc()
			}
			s.log.Info("event stream dropped: the client fell too far behind",
				"remote", remote, "resume_from", env.Position, "buffer_bytes", s.FollowerBufferBytes)
			return
		}
	}
	q.end()
}

func joinFrames(frames [][]byte, size int) []byte {
	if len(frames) == 1 {
		return frames[0]
	}
	out := make([]byte, 0, size)
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// followerQueue is what one event stream holds for its client: encoded
// frames waiting to be written plus those being written, at most limit
// bytes (one frame larger than limit passes alone, so no event is too big
// to follow).
type followerQueue struct {
	limit int
	// ready has a value when there is something to take.
	ready chan struct{}

	mu         sync.Mutex
	frames     [][]byte
	size       int    // bytes queued or being written
	lastQueued uint64 // position of the last frame queued
	dropped    bool
	resumeFrom uint64 // once dropped: the first position not queued
	ended      bool
}

func newFollowerQueue(limit int, after uint64) *followerQueue {
	return &followerQueue{limit: limit, ready: make(chan struct{}, 1), lastQueued: after}
}

func (q *followerQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// push queues the frame of the event at position pos. When it does not
// fit, nothing more is ever queued: the queue is dropped and push reports
// false.
func (q *followerQueue) push(frame []byte, pos uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped {
		return false
	}
	if q.size > 0 && q.size+len(frame) > q.limit {
		q.dropped, q.resumeFrom = true, pos
		q.signal()
		return false
	}
	q.frames = append(q.frames, frame)
	q.size += len(frame)
	q.lastQueued = pos
	q.signal()
	return true
}

// end marks the end of the events: the stream closes once they are written.
func (q *followerQueue) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	q.signal()
}

// followerBatch is what take hands to the writer.
type followerBatch struct {
	frames     [][]byte
	size       int
	lastQueued uint64
	dropped    bool
	resumeFrom uint64
	ended      bool
}

// take hands over every queued frame; their bytes still count against the
// limit until release. Once it reports dropped or ended, nothing follows.
func (q *followerQueue) take() followerBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := followerBatch{frames: q.frames, lastQueued: q.lastQueued,
		dropped: q.dropped, resumeFrom: q.resumeFrom, ended: q.ended}
	for _, f := range q.frames {
		b.size += len(f)
	}
	q.frames = nil
	return b
}

// release returns the room of written frames.
func (q *followerQueue) release(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.size -= n
}
