package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/google/uuid"

	"hermes/commands"
	"hermes/events"
)

// Topic is the in-process topic events are published on.
const Topic = "hermes.events"

// Metadata keys of a published message (its UUID is the event id).
const (
	MetaType     = "type"
	MetaStream   = "stream"
	MetaPosition = "position"
)

// timeFormat is the API's timestamp format (microseconds, UTC).
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// routerCloseTimeout bounds how long a stop waits for in-flight handlers,
// whose requests are cancelled by then.
const routerCloseTimeout = 10 * time.Second

// Router delivers the event log to the configured webhooks, from a durable
// checkpoint, at least once, in log order (see the package doc). It also
// implements commands.FinalizeHook for the expiry watcher.
type Router struct {
	store  events.Store
	cfg    Config
	send   *sender
	poison *poisonLog
	wlog   watermill.LoggerAdapter

	// mu guards the acknowledgement of the message being published: the
	// names of the webhooks that delivered or poisoned it.
	mu        sync.Mutex
	inflight  uint64
	confirmed map[string]bool
}

var _ commands.FinalizeHook = (*Router)(nil)

// New returns a router over store. It creates cfg.Dir (0700) if needed.
func New(store events.Store, cfg Config) (*Router, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	return &Router{
		store:  store,
		cfg:    cfg,
		send:   newSender(cfg),
		poison: &poisonLog{path: filepath.Join(cfg.Dir, PoisonFile)},
		// watermill is chatty at info level (every handler start and
		// close); its info is our debug.
		wlog: watermill.NewSlogLoggerWithLevelMapping(cfg.Log.With("component", "hooks"), map[slog.Level]slog.Level{
			slog.LevelInfo: slog.LevelDebug,
		}),
	}, nil
}

// Run delivers events until ctx is done (then it returns nil) or delivery
// cannot go on (a store or checkpoint error). Events are read from the store
// subscription after the checkpoint; each is published and waited for until
// every webhook delivered or poisoned it, and the checkpoint is written
// after each batch. With no webhooks it only waits for ctx. Run may be
// called again after it returned (it resumes from the checkpoint), but not
// twice at once, and one Dir serves one running router (serve's gateway
// lock guarantees it per home).
func (r *Router) Run(ctx context.Context) error {
	if len(r.cfg.Webhooks) == 0 {
		<-ctx.Done()
		return nil
	}
	after, err := r.start(ctx)
	if err != nil {
		return err
	}

	pubsub := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, r.wlog)
	defer pubsub.Close()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: routerCloseTimeout}, r.wlog)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	for _, w := range r.cfg.Webhooks {
		h := router.AddConsumerHandler("webhook:"+w.Name, Topic, pubsub, r.handler(w))
		h.AddMiddleware(r.confirmMiddleware(w.Name), r.poisonMiddleware(w), middleware.Recoverer)
	}

	// The router stops with runCtx: its subscriptions close, which also
	// releases a Publish blocked on an unfinished delivery.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	routerDone := make(chan struct{})
	var routerErr error
	go func() {
		defer close(routerDone)
		routerErr = router.Run(runCtx)
	}()
	defer func() {
		stop()
		router.Close()
		<-routerDone
	}()
	select {
	case <-router.Running():
	case <-routerDone:
		return fmt.Errorf("hooks: router stopped before running: %v", routerErr)
	case <-ctx.Done():
		return nil
	}

	sub, err := r.store.Subscribe(runCtx, after)
	if err != nil {
		return fmt.Errorf("hooks: subscribe: %w", err)
	}
	defer sub.Close()
	for {
		batch := r.nextBatch(runCtx, sub.Events())
		if len(batch) == 0 {
			if ctx.Err() != nil {
				return nil
			}
			if err := sub.Err(); err != nil {
				return fmt.Errorf("hooks: subscription: %w", err)
			}
			return errors.New("hooks: subscription ended")
		}
		last, derr := r.deliverBatch(pubsub, batch)
		if last > after {
			if err := writeCheckpoint(r.cfg.Dir, last); err != nil {
				return err
			}
			after = last
		}
		if derr != nil {
			if ctx.Err() != nil {
				return nil
			}
			return derr
		}
	}
}

// Checkpoint returns the position up to which every event was delivered or
// poisoned (0 when nothing was yet).
func (r *Router) Checkpoint() (uint64, error) {
	pos, _, err := ReadCheckpoint(r.cfg.Dir)
	return pos, err
}

// start returns the position to deliver after.
func (r *Router) start(ctx context.Context) (uint64, error) {
	pos, ok, err := ReadCheckpoint(r.cfg.Dir)
	if err != nil || ok {
		return pos, err
	}
	if !r.cfg.StartAtHead {
		return 0, nil
	}
	head, err := r.store.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("hooks: head: %w", err)
	}
	// Recorded at once, so events appended before a crash that comes
	// before the first delivery are not skipped by the next start.
	return head, writeCheckpoint(r.cfg.Dir, head)
}

// nextBatch waits for one envelope, then takes what else is ready, up to
// BatchSize. It returns nothing when ctx ends or the subscription closes.
func (r *Router) nextBatch(ctx context.Context, in <-chan events.Envelope) []events.Envelope {
	var batch []events.Envelope
	select {
	case env, ok := <-in:
		if !ok {
			return nil
		}
		batch = append(batch, env)
	case <-ctx.Done():
		return nil
	}
	for len(batch) < r.cfg.BatchSize {
		select {
		case env, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, env)
		default:
			return batch
		}
	}
	return batch
}

// errInterrupted: a publish returned before every webhook finished the
// event (the router is stopping).
var errInterrupted = errors.New("hooks: delivery interrupted")

// deliverBatch publishes the batch in order and returns the position of the
// last event every webhook finished (0 when none), and why it stopped early.
func (r *Router) deliverBatch(pub message.Publisher, batch []events.Envelope) (uint64, error) {
	var last uint64
	for _, env := range batch {
		if events.IsLeaseType(env.Type) {
			// Coordination between nodes (leases), not an event of a
			// session: never delivered.
			last = env.Position
			continue
		}
		body, err := encodeEnvelope(env)
		if err != nil {
			// It would fail the same way every time: poison it rather
			// than stop delivery for good.
			if err := r.poisonUnencodable(env, err); err != nil {
				return last, err
			}
			last = env.Position
			continue
		}
		msg := message.NewMessage(env.ID, body)
		msg.Metadata.Set(MetaType, env.Type)
		msg.Metadata.Set(MetaStream, env.Stream)
		msg.Metadata.Set(MetaPosition, strconv.FormatUint(env.Position, 10))
		r.expect(env.Position)
		if err := pub.Publish(Topic, msg); err != nil {
			return last, fmt.Errorf("hooks: publish: %w", err)
		}
		if !r.complete() {
			return last, errInterrupted
		}
		last = env.Position
	}
	return last, nil
}

// poisonUnencodable records, for every webhook that wants it, an event that
// cannot be rendered as JSON.
func (r *Router) poisonUnencodable(env events.Envelope, cause error) error {
	for _, w := range r.cfg.Webhooks {
		if !w.Wants(env.Type) {
			continue
		}
		err := r.poison.write(PoisonRecord{
			Time: r.cfg.Now().UTC(), Webhook: w.Name, EventID: env.ID, Type: env.Type,
			Stream: env.Stream, Position: env.Position, Error: "encode: " + cause.Error(),
		})
		if err != nil {
			return fmt.Errorf("hooks: position %d: %w", env.Position, errors.Join(cause, err))
		}
	}
	r.cfg.Log.Error("event cannot be encoded; written to the poison log", "event_id", env.ID, "position", env.Position, "err", cause)
	return nil
}

func (r *Router) expect(pos uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight = pos
	r.confirmed = make(map[string]bool, len(r.cfg.Webhooks))
}

func (r *Router) confirm(pos uint64, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pos == r.inflight {
		r.confirmed[name] = true
	}
}

func (r *Router) complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.confirmed) == len(r.cfg.Webhooks)
}

// undeliverable is a delivery that failed for good after its attempts.
type undeliverable struct {
	attempts int
	err      error
}

func (u *undeliverable) Error() string {
	return fmt.Sprintf("gave up after %d attempts: %v", u.attempts, u.err)
}

func (u *undeliverable) Unwrap() error { return u.err }

// handler delivers one message to webhook w, with its retries.
func (r *Router) handler(w WebhookConfig) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		typ := msg.Metadata.Get(MetaType)
		if !w.Wants(typ) {
			return nil
		}
		attempts, err := r.send.deliver(msg.Context(), w, msg.UUID, typ, msg.Payload, func(n int, err error) {
			r.cfg.Log.Warn("webhook delivery failed; retrying", "webhook", w.Name, "event_id", msg.UUID,
				"type", typ, "position", msg.Metadata.Get(MetaPosition), "attempt", n, "err", err)
		})
		if err != nil && msg.Context().Err() == nil {
			return &undeliverable{attempts: attempts, err: err}
		}
		return err
	}
}

// poisonMiddleware writes a message the handler gave up on to the poison
// log and lets delivery move on; a message whose delivery was cut short by
// a stop is left unacknowledged instead, to be delivered again.
func (r *Router) poisonMiddleware(w WebhookConfig) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil || msg.Context().Err() != nil {
				return out, err
			}
			attempts := 1
			var u *undeliverable
			if errors.As(err, &u) {
				attempts = u.attempts
			}
			pos, _ := strconv.ParseUint(msg.Metadata.Get(MetaPosition), 10, 64)
			rec := PoisonRecord{
				Time:     r.cfg.Now().UTC(),
				Webhook:  w.Name,
				EventID:  msg.UUID,
				Type:     msg.Metadata.Get(MetaType),
				Stream:   msg.Metadata.Get(MetaStream),
				Position: pos,
				Attempts: attempts,
				Error:    err.Error(),
			}
			if len(msg.Payload) <= r.cfg.MaxBodyBytes {
				rec.Envelope = json.RawMessage(msg.Payload)
			}
			if perr := r.poison.write(rec); perr != nil {
				r.cfg.Log.Error("webhook delivery failed and the poison log cannot be written; will retry", "webhook", w.Name, "event_id", msg.UUID, "err", perr)
				return out, errors.Join(err, perr)
			}
			r.cfg.Log.Error("webhook delivery failed for good; event written to the poison log",
				"webhook", w.Name, "event_id", msg.UUID, "type", rec.Type, "position", pos, "attempts", attempts, "err", err)
			return out, nil
		}
	}
}

// confirmMiddleware records that webhook name finished the message.
func (r *Router) confirmMiddleware(name string) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil {
				pos, perr := strconv.ParseUint(msg.Metadata.Get(MetaPosition), 10, 64)
				if perr == nil {
					r.confirm(pos, name)
				}
			}
			return out, err
		}
	}
}

// Envelope is the JSON body of a delivery: the API's envelope shape.
type Envelope struct {
	Stream        string          `json:"stream"`
	Version       uint64          `json:"version"`
	Position      uint64          `json:"position"`
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	Time          *string         `json:"time"`
	Data          json.RawMessage `json:"data"`
	Metadata      events.Metadata `json:"metadata"`
}

func encodeEnvelope(env events.Envelope) ([]byte, error) {
	data, err := events.Encode(env.Event)
	if err != nil {
		return nil, err
	}
	out := Envelope{
		Stream:        env.Stream,
		Version:       env.Version,
		Position:      env.Position,
		ID:            env.ID,
		Type:          env.Type,
		SchemaVersion: events.SchemaVersionOf(env.Type),
		Time:          timestamp(env.RecordedAt),
		Data:          data,
		Metadata:      env.Metadata,
	}
	return json.Marshal(out)
}

func timestamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}

// FinalizePayload is the body of a session.finalize delivery.
type FinalizePayload struct {
	ID   string       `json:"id"`
	Type string       `json:"type"`
	Time *string      `json:"time"`
	Data FinalizeData `json:"data"`
}

// FinalizeData is Hermes' on_session_finalize arguments.
type FinalizeData struct {
	SessionKey string `json:"session_key"`
	SessionID  string `json:"session_id"`
	Platform   string `json:"platform"`
	Reason     string `json:"reason"`
}

// finalizeIDSpace scopes the ids of finalize deliveries.
var finalizeIDSpace = uuid.MustParse("3b0c6f52-8f0e-4d55-9a7e-2f4f1d6a9c13")

// Finalize POSTs a session.finalize to every webhook that lists it, at
// once, one attempt each (the watcher retries on its next pass). Its id is
// derived from the session id and reason, so a repeat has the same
// X-Hermes-Event-Id. It fails if any webhook failed; with no such webhook
// it does nothing.
func (r *Router) Finalize(ctx context.Context, req commands.FinalizeRequest) error {
	var targets []WebhookConfig
	for _, w := range r.cfg.Webhooks {
		if w.Wants(FinalizeEventType) {
			targets = append(targets, w)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	id := uuid.NewSHA1(finalizeIDSpace, []byte(req.SessionID+"\x00"+req.Reason)).String()
	body, err := json.Marshal(FinalizePayload{
		ID:   id,
		Type: FinalizeEventType,
		Time: timestamp(r.cfg.Now()),
		Data: FinalizeData{SessionKey: req.SessionKey, SessionID: req.SessionID, Platform: req.Platform, Reason: req.Reason},
	})
	if err != nil {
		return fmt.Errorf("finalize %s: %w", req.SessionID, err)
	}
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, w := range targets {
		wg.Go(func() {
			if err := r.send.post(ctx, w, id, FinalizeEventType, body); err != nil {
				errs[i] = fmt.Errorf("webhook %s: %w", w.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finalize %s: %w", req.SessionID, err)
	}
	return nil
}
