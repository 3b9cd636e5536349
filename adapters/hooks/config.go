package hooks

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of [WebhookConfig] and [Config].
const (
	DefaultMaxRetries       = 5
	DefaultBackoff          = time.Second
	DefaultMaxBackoff       = time.Minute
	DefaultTimeout          = 10 * time.Second
	DefaultMaxInFlight      = 8
	DefaultBatchSize        = 64
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxResponseBytes = 64 << 10
)

// FinalizeEventType is the event type a webhook lists in EventTypes to
// receive the expiry watcher's on_session_finalize calls.
const FinalizeEventType = "session.finalize"

// WebhookConfig is one HTTP endpoint that receives events.
type WebhookConfig struct {
	// Name identifies the webhook in logs and in the poison log; unique.
	Name string
	// URL is the http or https endpoint events are POSTed to.
	URL string
	// EventTypes selects the events: empty means every stored event (but
	// not session.finalize, which must be listed). An entry matches a type
	// equal to it, a type that is it plus a version suffix
	// ("lane.suspended" matches "lane.suspended.v2"), or, when it ends with
	// "." or "*", every type it prefixes ("lane." or "lane.*").
	EventTypes []string
	// Secret keys the X-Hermes-Signature HMAC; empty: no signature.
	Secret string
	// MaxRetries is how many times a failed delivery is retried before the
	// event is poisoned (0: DefaultMaxRetries; negative: never retried).
	MaxRetries int
	// Backoff is the first wait between attempts (default 1s); it doubles
	// on each retry up to MaxBackoff (default 1 min).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Timeout bounds one request, response included (default 10s).
	Timeout time.Duration
}

// Config configures a [Router].
type Config struct {
	// Dir holds hooks.checkpoint and hooks.poison.jsonl.
	Dir      string
	Webhooks []WebhookConfig
	// StartAtHead: with no checkpoint yet, start after the store's current
	// head (and record it at once) instead of delivering the whole history.
	StartAtHead bool
	// MaxInFlight bounds the HTTP requests in flight, over all webhooks and
	// finalize calls (default 8).
	MaxInFlight int
	// BatchSize is how many events are delivered between two checkpoint
	// writes at most (default 64).
	BatchSize int
	// MaxBodyBytes is the largest request body sent; a larger event is
	// poisoned for the webhooks that want it (default 1 MiB).
	MaxBodyBytes int
	// MaxResponseBytes is how much of a response body is read (default
	// 64 KiB); the rest is dropped with the connection.
	MaxResponseBytes int64
	// Client sends the requests; nil: a client that never follows
	// redirects (a 3xx is a failure).
	Client *http.Client
	// Now stamps X-Hermes-Timestamp and finalize payloads (default
	// time.Now).
	Now func() time.Time
	// Log receives delivery failures and watermill's own messages
	// (nil: discarded).
	Log *slog.Logger
	// MayAct, when set, is asked right before every request (each attempt
	// of each delivery, each finalize call): while it returns an error the
	// request waits, unsent, until it returns nil or the delivery is
	// stopped (then the event stays unacknowledged, to be delivered by
	// whoever holds the duty). With several nodes it is the leader lease
	// checked by this node's own clock, so a leader that was paused past
	// its lease sends nothing when it wakes.
	MayAct func() error
}

func (c *Config) setDefaults() error {
	if c.Dir == "" {
		return errors.New("hooks: no directory for the checkpoint and the poison log")
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Client == nil {
		c.Client = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	seen := map[string]bool{}
	var errs []error
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		if err := w.setDefaults(); err != nil {
			errs = append(errs, fmt.Errorf("hooks: webhook %d: %w", i, err))
			continue
		}
		if seen[w.Name] {
			errs = append(errs, fmt.Errorf("hooks: webhook name %q is used twice", w.Name))
		}
		seen[w.Name] = true
	}
	return errors.Join(errs...)
}

func (w *WebhookConfig) setDefaults() error {
	if strings.TrimSpace(w.Name) == "" {
		return errors.New("no name")
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: url must be an absolute http or https URL", w.Name)
	}
	switch {
	case w.MaxRetries == 0:
		w.MaxRetries = DefaultMaxRetries
	case w.MaxRetries < 0:
		w.MaxRetries = 0
	}
	if w.Backoff <= 0 {
		w.Backoff = DefaultBackoff
	}
	if w.MaxBackoff <= 0 {
		w.MaxBackoff = DefaultMaxBackoff
	}
	w.MaxBackoff = max(w.MaxBackoff, w.Backoff)
	if w.Timeout <= 0 {
		w.Timeout = DefaultTimeout
	}
	for _, t := range w.EventTypes {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("%s: empty event type", w.Name)
		}
	}
	return nil
}

// Wants reports whether the webhook receives events of type typ.
func (w WebhookConfig) Wants(typ string) bool {
	if len(w.EventTypes) == 0 {
		return typ != FinalizeEventType
	}
	for _, sel := range w.EventTypes {
		if matchType(sel, typ) {
			return true
		}
	}
	return false
}

func matchType(sel, typ string) bool {
	if sel == typ {
		return true
	}
	if p, ok := strings.CutSuffix(sel, "*"); ok {
		return strings.HasPrefix(typ, p)
	}
	if strings.HasSuffix(sel, ".") {
		return strings.HasPrefix(typ, sel)
	}
	// A name without its version matches every version of it.
	rest, ok := strings.CutPrefix(typ, sel+".v")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// backoff is the wait before retry n (1-based): Backoff doubled n−1 times,
// capped at MaxBackoff.
func (w WebhookConfig) backoff(n int) time.Duration {
	d := w.Backoff
	for i := 1; i < n && d < w.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.MaxBackoff)
}
