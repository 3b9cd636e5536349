package testfixtures

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"hermes/events"
)

// HistoryOptions shape a generated history.
type HistoryOptions struct {
	// Events is how many events to generate (about 30% lane events, 70%
	// transcript messages of ~200 characters).
	Events int
	// Lanes is the number of conversation lanes.
	Lanes int
	// Seed makes the history deterministic.
	Seed uint64
	// Start is the time of the first event; events are 1 s apart.
	Start time.Time
	// CJKShare is the share of messages written in Chinese (0–1).
	CJKShare float64
}

// Batch is what one append writes: events of one stream.
type Batch struct {
	// Lane is the session key the batch belongs to (its lane stream or a
	// transcript of one of its sessions).
	Lane     string
	Stream   string
	Proposed []events.Proposed
}

var englishWords = strings.Fields(`the deploy failed because docker compose could not reach the network bridge so we
restarted the gateway and checked logs for timeout errors in the telegram adapter while the model kept retrying
tool calls against the search index with stale credentials after midnight when the cron job rotated secrets and
session resume markers were written before the drain finished which explains why users saw their context reset`)

var cjkWords = []string{"记忆", "断裂", "会话", "重置", "网关", "重启", "搜索", "索引", "超时", "错误", "模型", "工具", "调用", "日志", "用户", "上下文"}

// GenerateHistory produces a deterministic, valid history: lanes are
// created, run turns, are touched and occasionally reset; messages go to the
// transcript of their lane's current session. It calls emit for every
// append-sized batch, in order.
func GenerateHistory(o HistoryOptions, emit func(Batch) error) error {
	if o.Lanes < 1 {
		o.Lanes = 1
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	type lane struct {
		key, session string
		created      bool
		turn         int
		open         bool
	}
	lanes := make([]lane, o.Lanes)
	for i := range lanes {
		lanes[i].key = fmt.Sprintf("agent:main:telegram:dm:%d", 100000+i)
	}
	at := o.Start
	n := 0
	id := func() string { n++; return fmt.Sprintf("gen-%d-%d", o.Seed, n) }
	next := func() time.Time { at = at.Add(time.Second); return at }
	newSession := func(t time.Time) string {
		return fmt.Sprintf("%s_%08x", t.UTC().Format("20060102_150405"), rng.Uint32())
	}
	emitted := 0
	for emitted < o.Events {
		i := rng.IntN(len(lanes))
		l := &lanes[i]
		stream := events.LaneStream(l.key)
		var e events.Event
		switch {
		case !l.created:
			t := next()
			l.session, l.created = newSession(t), true
			e = events.SessionCreated{
				SessionKey: l.key, SessionID: l.session, Platform: "telegram", ChatType: "dm", At: t,
				Origin: events.Source{Platform: "telegram", ChatID: strings.TrimPrefix(l.key, "agent:main:telegram:dm:"), ChatType: "dm"},
			}
		case rng.Float64() < 0.48:
			msgs := 1 + rng.IntN(4)
			batch := Batch{Lane: l.key, Stream: events.TranscriptStream(l.session)}
			for range min(msgs, o.Events-emitted) {
				role := "user"
				if rng.IntN(2) == 1 {
					role = "assistant"
				}
				content, _ := json.Marshal(sentence(rng, o.CJKShare))
				batch.Proposed = append(batch.Proposed, events.Proposed{
					ID:    id(),
					Event: events.MessageAppended{SessionID: l.session, Message: events.Message{Role: role, Content: content}, At: next()},
				})
			}
			emitted += len(batch.Proposed)
			if err := emit(batch); err != nil {
				return err
			}
			continue
		default:
			t := next()
			switch r := rng.IntN(10); {
			case !l.open && r < 5:
				l.turn++
				l.open = true
				e = events.TurnStarted{TurnID: fmt.Sprintf("turn_%d", l.turn), SessionID: l.session, At: t}
			case l.open && r < 8:
				l.open = false
				e = events.TurnCompleted{TurnID: fmt.Sprintf("turn_%d", l.turn), SessionID: l.session,
					InputTokens: int64(100 + rng.IntN(900)), OutputTokens: int64(10 + rng.IntN(300)), At: t}
			case r == 9 && !l.open && rng.IntN(5) == 0:
				// A reset is rare next to the turns and touches of a
				// conversation: about 0.6% of all events.
				prev := l.session
				l.session = newSession(t)
				e = events.SessionAutoReset{SessionKey: l.key, SessionID: l.session, PreviousSessionID: prev, Reason: events.AutoResetIdle,
					HadActivity: true, Platform: "telegram", ChatType: "dm", At: t}
			default:
				e = events.Touched{At: t}
			}
		}
		emitted++
		if err := emit(Batch{Lane: l.key, Stream: stream, Proposed: []events.Proposed{{ID: id(), Event: e}}}); err != nil {
			return err
		}
	}
	return nil
}

// sentence is ~200 characters of English or Chinese.
func sentence(rng *rand.Rand, cjk float64) string {
	var b strings.Builder
	if rng.Float64() < cjk {
		for b.Len() < 200 {
			b.WriteString(cjkWords[rng.IntN(len(cjkWords))])
		}
		return b.String()
	}
	for b.Len() < 200 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(englishWords[rng.IntN(len(englishWords))])
	}
	return b.String()
}

// LoadHistory appends a generated history to store, with up to parallel
// appends in flight (so the store's group commit batches them).
func LoadHistory(ctx context.Context, store events.Store, o HistoryOptions, parallel int) error {
	if parallel < 1 {
		parallel = 1
	}
	errs := make(chan error, parallel)
	// A lane's events (its stream and its transcripts) stay in order: each
	// lane is routed to one worker.
	workers := make([]chan Batch, parallel)
	for w := range workers {
		workers[w] = make(chan Batch, 64)
		go func(in chan Batch) {
			var first error
			for b := range in {
				if first != nil {
					continue
				}
				if _, err := store.Append(ctx, b.Stream, events.AnyVersion(), b.Proposed); err != nil {
					first = fmt.Errorf("append %s: %w", b.Stream, err)
				}
			}
			errs <- first
		}(workers[w])
	}
	genErr := GenerateHistory(o, func(b Batch) error {
		workers[streamShard(b.Lane, parallel)] <- b
		return nil
	})
	for _, w := range workers {
		close(w)
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if genErr != nil {
		return genErr
	}
	return first
}

func streamShard(s string, n int) int {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
