package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Headers of every delivery.
const (
	HeaderEventID   = "X-Hermes-Event-Id"
	HeaderEventType = "X-Hermes-Event-Type"
	HeaderSignature = "X-Hermes-Signature"
	HeaderTimestamp = "X-Hermes-Timestamp"
)

// Sign returns the X-Hermes-Signature value of body under secret:
// "sha256=" and the hex HMAC-SHA256. Receivers compute the same over the raw
// request body and compare in constant time.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// StatusError is a delivery answered with a status other than 2xx.
type StatusError struct {
	Code int
	// Body is the start of the response body, for the logs.
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("status %d", e.Code)
	}
	return fmt.Sprintf("status %d: %s", e.Code, e.Body)
}

// permanent reports whether retrying err cannot help: a client error other
// than timeout, too early and too many requests, or a body over the limit.
func permanent(err error) bool {
	if errors.Is(err, errTooLarge) {
		return true
	}
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return se.Code >= 400 && se.Code < 500
}

var errTooLarge = errors.New("event body exceeds the webhook body limit")

// sender posts bodies to webhooks, bounding what is in flight.
type sender struct {
	client   *http.Client
	slots    chan struct{}
	now      func() time.Time
	maxBody  int
	maxReply int64
	mayAct   func() error
	log      *slog.Logger
}

func newSender(cfg Config) *sender {
	return &sender{
		client:   cfg.Client,
		slots:    make(chan struct{}, cfg.MaxInFlight),
		now:      cfg.Now,
		maxBody:  cfg.MaxBodyBytes,
		maxReply: cfg.MaxResponseBytes,
		mayAct:   cfg.MayAct,
		log:      cfg.Log,
	}
}

// mayActPoll is how often a request held back by Config.MayAct asks again.
const mayActPoll = 50 * time.Millisecond

// awaitMayAct returns once Config.MayAct allows a request, or ctx's error.
func (s *sender) awaitMayAct(ctx context.Context) error {
	if s.mayAct == nil {
		return nil
	}
	err := s.mayAct()
	if err == nil {
		return nil
	}
	s.log.Warn("webhook request held back: this node may not act as the holder of the duty", "err", err)
	t := time.NewTicker(mayActPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if s.mayAct() == nil {
				return nil
			}
		}
	}
}

// post makes one delivery attempt.
func (s *sender) post(ctx context.Context, w WebhookConfig, id, typ string, body []byte) error {
	if len(body) > s.maxBody {
		return fmt.Errorf("%w (%d > %d bytes)", errTooLarge, len(body), s.maxBody)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.slots }()
	// Right before the request: a node that lost the duty while it waited
	// (paused, cut off from the store) must not send.
	if err := s.awaitMayAct(ctx); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hermes-hooks/1")
	req.Header.Set(HeaderEventID, id)
	req.Header.Set(HeaderEventType, typ)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(s.now().Unix(), 10))
	if w.Secret != "" {
		req.Header.Set(HeaderSignature, Sign(w.Secret, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, min(s.maxReply, 512)))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.maxReply))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(head))}
}

// deliver posts with retries and backoff: up to 1 + MaxRetries attempts,
// fewer when the error is permanent. It returns the attempts made and the
// last error; it stops at once when ctx ends. onRetry is told of each failed
// attempt that will be retried.
func (s *sender) deliver(ctx context.Context, w WebhookConfig, id, typ string, body []byte, onRetry func(attempt int, err error)) (int, error) {
	attempts := 0
	for {
		attempts++
		err := s.post(ctx, w, id, typ, body)
		if err == nil {
			return attempts, nil
		}
		if ctx.Err() != nil {
			return attempts, ctx.Err()
		}
		if permanent(err) || attempts > w.MaxRetries {
			return attempts, err
		}
		if onRetry != nil {
			onRetry(attempts, err)
		}
		t := time.NewTimer(w.backoff(attempts))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return attempts, ctx.Err()
		}
	}
}
