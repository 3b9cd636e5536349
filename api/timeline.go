package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"hermes/domain"
	"hermes/events"
)

const (
	defaultTimelineLimit = 500
	maxTimelineLimit     = 1000
)

// FieldChange is one SessionEntry field an event changed, with its JSON
// values.
type FieldChange struct {
	Field  string          `json:"field"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// EntryChanges lists the SessionEntry fields that differ between two
// states of a lane, by field name; version and updated_at (which move with
// nearly every event) are left out. `hermes events tail` prints them as
// "{a: x → y}".
func EntryChanges(before, after domain.Lane) []FieldChange {
	b, a := reflect.ValueOf(NewEntry(before, 0)), reflect.ValueOf(NewEntry(after, 0))
	var out []FieldChange
	for i := range b.NumField() {
		name, _, _ := strings.Cut(b.Type().Field(i).Tag.Get("json"), ",")
		if name == "version" || name == "updated_at" {
			continue
		}
		bv, av := fieldJSON(b.Field(i)), fieldJSON(a.Field(i))
		if !bytes.Equal(bv, av) {
			out = append(out, FieldChange{Field: name, Before: bv, After: av})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// fieldJSON is one Entry field as the API renders it.
func fieldJSON(v reflect.Value) json.RawMessage {
	data, err := json.Marshal(v.Interface())
	if err != nil {
		panic(fmt.Sprintf("encode entry field: %v", err)) // every Entry field encodes
	}
	return data
}

// TimelineItem is one event of a lane's timeline: what it was, what it
// changed, the entry right after it (domain.StateAtVersion at its version)
// and the next reset that state was heading for.
type TimelineItem struct {
	Version  uint64    `json:"version"`
	Position uint64    `json:"position"`
	Time     Timestamp `json:"time"`
	Type     string    `json:"type"`
	// Category groups the types for display: session, turn, queue, notice,
	// recovery or activity.
	Category string        `json:"category"`
	Summary  string        `json:"summary"`
	Changes  []FieldChange `json:"changes"`
	Entry    Entry         `json:"entry"`
	// Reset is set on the events that replaced the lane's session.
	Reset     *TimelineReset `json:"reset"`
	NextReset NextReset      `json:"next_reset"`
}

// TimelineReset is a replaced session: how (auto_reset, new, switch,
// force_new, recreated), the reason of an auto-reset, and why it was due.
type TimelineReset struct {
	Kind              string  `json:"kind"`
	Reason            *string `json:"reason"`
	SessionID         string  `json:"session_id"`
	PreviousSessionID *string `json:"previous_session_id"`
	HadActivity       bool    `json:"had_activity"`
	Why               string  `json:"why"`
}

// NextReset is domain.ResetForecast as the API answers it.
type NextReset struct {
	Reason *string   `json:"reason"`
	At     Timestamp `json:"at"`
	Why    string    `json:"why"`
}

type timelineResponse struct {
	SessionKey string `json:"session_key"`
	// Total is the lane's number of events (its last version).
	Total    uint64         `json:"total"`
	Now      Timestamp      `json:"now"`
	TimeZone string         `json:"time_zone"`
	Items    []TimelineItem `json:"items"`
}

func (s *Server) timelineRoutes(rt routes) {
	rt.get("/sessions/{key}/timeline", withKey(s.laneTimeline))
}

// laneTimeline is GET /v1/sessions/{key}/timeline: the lane's events from
// from_version on (at most limit), each with its summary, changed fields,
// the entry after it and the next reset forecast under the current rules.
func (s *Server) laneTimeline(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	from, err := queryUint(r, "from_version", 1)
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", defaultTimelineLimit, 1, maxTimelineLimit)
	if err != nil {
		return err
	}
	history, err := s.readLane(r, key)
	if err != nil {
		return err
	}
	cfg := s.Commands.Config()
	out := timelineResponse{
		SessionKey: string(key),
		Total:      uint64(len(history)),
		Now:        Timestamp(s.Commands.Now()),
		TimeZone:   cfg.Location.String(),
		Items:      []TimelineItem{},
	}
	rules := func(l domain.Lane) domain.LaneRules {
		return domain.LaneRules{Policy: cfg.Policies.For(l.Platform, l.ChatType), Location: cfg.Location, ResumeFreshness: cfg.ResumeFreshness}
	}
	var lane domain.Lane
	for _, env := range history {
		before := lane
		lane = domain.Evolve(lane, env.Event)
		if env.Version < from {
			continue
		}
		if len(out.Items) == limit {
			break
		}
		f := lane.NextReset(rules(lane))
		out.Items = append(out.Items, TimelineItem{
			Version:   env.Version,
			Position:  env.Position,
			Time:      Timestamp(env.Event.OccurredAt()),
			Type:      env.Type,
			Category:  category(env.Event),
			Summary:   domain.Summary(env.Event),
			Changes:   nonNil(EntryChanges(before, lane)),
			Entry:     NewEntry(lane, env.Version),
			Reset:     timelineReset(before, env.Event, rules(before)),
			NextReset: NextReset{Reason: nullable(f.Reason), At: Timestamp(f.At), Why: f.Why},
		})
	}
	return respond(w, out)
}

// timelineReset describes an event that replaced the lane's session, nil
// for any other.
func timelineReset(before domain.Lane, e events.Event, r domain.LaneRules) *TimelineReset {
	switch e := e.(type) {
	case events.SessionAutoReset:
		return &TimelineReset{
			Kind: "auto_reset", Reason: nullable(e.Reason), SessionID: e.SessionID,
			PreviousSessionID: nullable(e.PreviousSessionID), HadActivity: e.HadActivity,
			Why: before.ExplainReset(e.Reason, e.At, r),
		}
	case events.SessionReset:
		return &TimelineReset{
			Kind: "new", SessionID: e.SessionID, PreviousSessionID: nullable(e.PreviousSessionID),
			HadActivity: before.HadActivity, Why: "/new or /reset: the user asked for a new session",
		}
	case events.SessionSwitched:
		return &TimelineReset{
			Kind: "switch", SessionID: e.SessionID, PreviousSessionID: nullable(e.PreviousSessionID),
			HadActivity: before.HadActivity, Why: "/resume: the user switched to another session",
		}
	case events.SessionCreated:
		switch {
		case e.ForceNew:
			return &TimelineReset{
				Kind: "force_new", SessionID: e.SessionID, PreviousSessionID: nullable(e.PreviousSessionID),
				HadActivity: before.HadActivity, Why: "force_new: the gateway asked for a new session",
			}
		case e.PreviousSessionID != "":
			return &TimelineReset{
				Kind: "recreated", SessionID: e.SessionID, PreviousSessionID: nullable(e.PreviousSessionID),
				HadActivity: before.HadActivity, Why: "the entry had been pruned for age: the next message created a new session",
			}
		}
	}
	return nil
}

// category groups event types for display.
func category(e events.Event) string {
	switch e.(type) {
	case events.SessionCreated, events.SessionAutoReset, events.SessionReset, events.SessionSwitched,
		events.ExpiryFinalized, events.EntryPruned:
		return "session"
	case events.TurnStarted, events.TurnCompleted, events.TurnInterrupted:
		return "turn"
	case events.QueueItemAdded, events.QueueItemTaken, events.QueueCleared, events.QueueItemsExpired:
		return "queue"
	case events.NoticeDelivered:
		return "notice"
	case events.Suspended, events.ResumeMarked, events.ResumeCleared:
		return "recovery"
	default:
		return "activity"
	}
}
