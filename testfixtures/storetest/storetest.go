package storetest

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Run runs the contract suite. open must return a new, empty store for the
// calling test and close it in t.Cleanup; the suite may close it earlier
// itself, so a second Close must be harmless. Subtests run in parallel, each
// with its own store.
func Run(t *testing.T, open func(t *testing.T) events.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s events.Store)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"VersionsContiguous", testVersionsContiguous},
		{"ExpectedVersion", testExpectedVersion},
		{"IdempotentAppend", testIdempotentAppend},
		{"PartialDuplicateRejected", testPartialDuplicate},
		{"InvalidAppend", testInvalidAppend},
		{"ReadStreamRanges", testReadStreamRanges},
		{"StreamNotFound", testStreamNotFound},
		{"ReadAllRanges", testReadAllRanges},
		{"Head", testHead},
		{"ReadAfterAppend", testReadAfterAppend},
		{"LargeEvents", testLargeEvents},
		{"ManyStreams", testManyStreams},
		{"ConcurrentAppendsSameStream", testConcurrentSameStream},
		{"SubscribeLive", testSubscribeLive},
		{"SubscribeCatchUpToLiveUnderLoad", testSubscribeHandover},
		{"SlowSubscriberDoesNotBlockAppends", testSlowSubscriber},
		{"SubscriptionEnds", testSubscriptionEnds},
		{"Snapshots", testSnapshots},
		{"Records", testRecords},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

// waitLimit bounds every wait on a store, so that a broken store fails the
// test instead of hanging it. Nothing waits for it to pass. It bounds one
// wait (one call, or the next event of a subscription), never a whole
// workload: how long a workload takes depends on how loaded the machine
// is, and a test must not fail because it ran on a busy one.
const waitLimit = 30 * time.Second

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// id is a deterministic, UUID-shaped event id (some stores accept only
// UUIDs), derived from a name the way hermes derives ids from commands.
func id(name string) string {
	h := sha1.Sum([]byte("storetest/" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// touched proposes one Touched event per name, ids derived from stream and name.
func touched(stream string, names ...string) []events.Proposed {
	ps := make([]events.Proposed, len(names))
	for i, n := range names {
		tokens := int64(100 + i)
		ps[i] = events.Proposed{
			ID:    id(stream + "/" + n),
			Event: events.Touched{LastPromptTokens: &tokens, At: t0.Add(time.Duration(i) * time.Second)},
			Metadata: events.Metadata{
				SchemaVersion: events.SchemaVersionOf(events.TypeTouched),
				Command:       "touch",
				CommandID:     "cmd-" + n,
				CorrelationID: "corr-" + stream,
			},
		}
	}
	return ps
}

// numbered proposes n Touched events named prefix-0 … prefix-(n-1).
func numbered(stream, prefix string, n int) []events.Proposed {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return touched(stream, names...)
}

func created(stream, name, displayName string) events.Proposed {
	return events.Proposed{
		ID: id(stream + "/" + name),
		Event: events.SessionCreated{
			SessionKey:  strings.TrimPrefix(stream, events.LanePrefix),
			SessionID:   "20260301_090000_" + name,
			Origin:      events.Source{Platform: "telegram", ChatID: "42", ChatType: "dm", UserID: "7"},
			DisplayName: displayName,
			Platform:    "telegram",
			ChatType:    "dm",
			At:          t0,
		},
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(events.TypeSessionCreated), Command: "get_or_create"},
	}
}

func lane(n int) string { return events.LaneStream(fmt.Sprintf("agent:main:telegram:dm:%d", n)) }

func mustAppend(t *testing.T, s events.Store, stream string, x events.ExpectedVersion, ps []events.Proposed) events.AppendResult {
	t.Helper()
	res, err := s.Append(t.Context(), stream, x, ps)
	if err != nil {
		t.Fatalf("Append(%s, %s, %d events) error = %v", stream, x, len(ps), err)
	}
	if len(res.Versions) != len(ps) || len(res.Positions) != len(ps) {
		t.Fatalf("Append(%s) = %d versions, %d positions, want %d of each", stream, len(res.Versions), len(res.Positions), len(ps))
	}
	return res
}

func readStream(t *testing.T, s events.Store, stream string, from uint64, count int, dir events.Direction) []events.Envelope {
	t.Helper()
	envs, err := s.ReadStream(t.Context(), stream, from, count, dir)
	if err != nil {
		t.Fatalf("ReadStream(%s, %d, %d, %v) error = %v", stream, from, count, dir, err)
	}
	return envs
}

func readAll(t *testing.T, s events.Store, after uint64, count int) []events.Envelope {
	t.Helper()
	envs, err := s.ReadAll(t.Context(), after, count)
	if err != nil {
		t.Fatalf("ReadAll(%d, %d) error = %v", after, count, err)
	}
	return envs
}

func head(t *testing.T, s events.Store) uint64 {
	t.Helper()
	h, err := s.Head(t.Context())
	if err != nil {
		t.Fatalf("Head() error = %v", err)
	}
	return h
}

// everything reads the whole log.
func everything(t *testing.T, s events.Store) []events.Envelope {
	t.Helper()
	var all []events.Envelope
	var after uint64
	for {
		page := readAll(t, s, after, 500)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Position
	}
}

var cmpEquateEmpty = cmpopts.EquateEmpty()

// ignoreRecordedAt compares envelopes on everything the writer chose or the
// store assigned deterministically.
var ignoreRecordedAt = cmpopts.IgnoreFields(events.Envelope{}, "RecordedAt")

// wantEnvelopes are the envelopes an append of ps to stream should read back as.
func wantEnvelopes(stream string, ps []events.Proposed, res events.AppendResult) []events.Envelope {
	out := make([]events.Envelope, len(ps))
	for i, p := range ps {
		out[i] = events.Envelope{
			Stream:   stream,
			Version:  res.Versions[i],
			Position: res.Positions[i],
			ID:       p.ID,
			Type:     p.Event.EventType(),
			Metadata: p.Metadata,
			Event:    p.Event,
		}
	}
	return out
}

func diffEnvelopes(t *testing.T, call string, got, want []events.Envelope) {
	t.Helper()
	if diff := cmp.Diff(want, got, ignoreRecordedAt, cmpEquateEmpty); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", call, diff)
	}
}

func positions(envs []events.Envelope) []uint64 {
	ps := make([]uint64, len(envs))
	for i, e := range envs {
		ps[i] = e.Position
	}
	return ps
}

func checkStrictlyIncreasing(t *testing.T, what string, ps []uint64) {
	t.Helper()
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] {
			t.Fatalf("%s: position %d follows %d, want strictly increasing", what, ps[i], ps[i-1])
		}
	}
}

// wantErrIs fails unless err wraps target.
func wantErrIs(t *testing.T, call string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s error = %v, want errors.Is %v", call, err, target)
	}
}

// appendWithin appends with waitLimit for this one call: a store that
// blocks an append fails the test; one that is only slow does not.
func appendWithin(t *testing.T, s events.Store, stream string, x events.ExpectedVersion, ps []events.Proposed) (events.AppendResult, error) {
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	return s.Append(ctx, stream, x, ps)
}
