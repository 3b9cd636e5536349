package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"hermes/events"
)

// ReadLog reads the whole log of store.
func ReadLog(ctx context.Context, store events.Store) ([]events.Envelope, error) {
	var all []events.Envelope
	var after uint64
	for {
		page, err := store.ReadAll(ctx, after, 4096)
		if err != nil {
			return nil, fmt.Errorf("read the log after %d: %w", after, err)
		}
		all = append(all, page...)
		if len(page) < 4096 {
			return all, nil
		}
		after = page[len(page)-1].Position
	}
}

// Anomaly is one broken promise, with the operations or events that show it.
type Anomaly struct {
	Checker string
	What    string
}

func (a Anomaly) String() string { return a.Checker + ": " + a.What }

// LogReport is what the log checkers found.
type LogReport struct {
	Events, Lanes, Messages int
	// Acknowledged counts the acknowledged writes looked up in the log.
	Acknowledged int
	Anomalies    []Anomaly
}

// CheckLog checks the log against the history: every acknowledged write
// is in the log exactly once; no lane holds two session_created (a fork)
// or a turn_started while another turn is open; no message of a turn is
// after the turn's end.
func CheckLog(log []events.Envelope, ops []Op) LogReport {
	rep := LogReport{Events: len(log)}
	add := func(checker, format string, args ...any) {
		rep.Anomalies = append(rep.Anomalies, Anomaly{checker, fmt.Sprintf(format, args...)})
	}
	type laneFacts struct {
		created  map[string]int // session id -> session_created/reset count
		creates  int
		started  map[string]int
		complete map[string]int
		closedAt map[string]uint64 // turn -> position of its end
	}
	lanes := map[string]*laneFacts{}
	lane := func(stream string) *laneFacts {
		f := lanes[stream]
		if f == nil {
			f = &laneFacts{created: map[string]int{}, started: map[string]int{}, complete: map[string]int{}, closedAt: map[string]uint64{}}
			lanes[stream] = f
		}
		return f
	}
	type message struct {
		stream   string
		position uint64
	}
	messages := map[string][]message{} // text -> where
	open := map[string]string{}        // lane stream -> open turn
	for _, env := range log {
		if strings.HasPrefix(env.Stream, events.TranscriptStream("")) {
			if m, ok := env.Event.(events.MessageAppended); ok {
				var text string
				if json.Unmarshal(m.Message.Content, &text) == nil && text != "" {
					messages[text] = append(messages[text], message{env.Stream, env.Position})
					rep.Messages++
				}
			}
			continue
		}
		if !strings.HasPrefix(env.Stream, events.LaneStream("")) {
			continue
		}
		f := lane(env.Stream)
		switch e := env.Event.(type) {
		case events.SessionCreated:
			f.creates++
			f.created[e.SessionID]++
			if f.creates == 2 {
				add("no-fork", "%s: a second session_created (%s) at position %d", env.Stream, e.SessionID, env.Position)
			}
		case events.SessionReset:
			f.created[e.SessionID]++
		case events.TurnStarted:
			f.started[e.TurnID]++
			if cur := open[env.Stream]; cur != "" && cur != e.TurnID {
				add("one-open-turn", "%s: turn %s started at position %d while turn %s was open", env.Stream, e.TurnID, env.Position, cur)
			}
			open[env.Stream] = e.TurnID
		case events.TurnCompleted:
			f.complete[e.TurnID]++
			if e.TurnID == "" || open[env.Stream] == e.TurnID {
				open[env.Stream] = ""
			}
			if _, ok := f.closedAt[e.TurnID]; !ok {
				f.closedAt[e.TurnID] = env.Position
			}
		case events.TurnInterrupted:
			if open[env.Stream] == e.TurnID {
				open[env.Stream] = ""
			}
			if _, ok := f.closedAt[e.TurnID]; !ok {
				f.closedAt[e.TurnID] = env.Position
			}
		}
	}
	rep.Lanes = len(lanes)

	for _, o := range ops {
		if o.Input.Kind == Message && o.Input.Turn != "" {
			// Whatever its outcome: a message of a turn stored after the
			// turn ended breaks the fence.
			if end, ok := lane(events.LaneStream(o.Input.Key)).closedAt[o.Input.Turn]; ok {
				for _, m := range messages[o.Input.Text] {
					if m.position > end {
						add("fence", "%s: message of turn %s at position %d, after the turn ended at %d (%s)", o.Input.Key, o.Input.Turn, m.position, end, o)
					}
				}
			}
		}
		if o.Output.Outcome != OK {
			continue
		}
		f := lane(events.LaneStream(o.Input.Key))
		var n int
		var what string
		switch o.Input.Kind {
		case Resolve:
			if !o.Output.Created {
				continue
			}
			n, what = f.created[o.Output.SessionID], "session "+o.Output.SessionID
		case Reset:
			n, what = f.created[o.Output.SessionID], "session "+o.Output.SessionID
		case Start:
			n, what = f.started[o.Input.Turn], "turn_started "+o.Input.Turn
		case Complete:
			n, what = f.complete[o.Input.Turn], "turn_completed "+o.Input.Turn
		case Message:
			n, what = len(messages[o.Input.Text]), "message "+o.Input.Text
		}
		rep.Acknowledged++
		if n != 1 {
			add("acknowledged-once", "%s in the log %d times, want 1 (%s)", what, n, o)
		}
	}
	return rep
}
