package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// ErrUnknownType: a stored type name this build cannot decode (written by a
// newer hermes, or not a hermes event at all).
var ErrUnknownType = errors.New("unknown event type")

// Encode returns the stored JSON of an event. The JSON is valid UTF-8 with
// no lone surrogate escapes: the agent's raw JSON fields are repaired (see
// text.go), so invalid text never enters the log.
func Encode(e Event) ([]byte, error) {
	data, err := json.Marshal(validText(e))
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
	}
	return data, nil
}

// Decode turns stored JSON back into its event, upcasting old shapes to the
// current one. Every string of the event it returns is valid UTF-8, and the
// raw JSON it carries has no lone surrogate escapes, whatever an older build
// stored (see text.go).
func Decode(typ string, data []byte) (Event, error) {
	e, err := decodeEvent(typ, data)
	if err != nil {
		return nil, err
	}
	return validText(e), nil
}

// decodeEvent is Decode before the text repair. Every type name ever
// written keeps a case here.
func decodeEvent(typ string, data []byte) (Event, error) {
	switch typ {
	case TypeSessionCreated:
		return decode[SessionCreated](typ, data)
	case TypeSessionAutoReset:
		return decode[SessionAutoReset](typ, data)
	case TypeSessionReset:
		return decode[SessionReset](typ, data)
	case TypeSessionSwitched:
		return decode[SessionSwitched](typ, data)
	case TypeSuspendedV1:
		var old SuspendedV1
		if err := unmarshal(typ, data, &old); err != nil {
			return nil, err
		}
		return upcastSuspendedV1(old), nil
	case TypeSuspended:
		return decode[Suspended](typ, data)
	case TypeResumeMarked:
		return decode[ResumeMarked](typ, data)
	case TypeResumeCleared:
		return decode[ResumeCleared](typ, data)
	case TypeTouched:
		return decode[Touched](typ, data)
	case TypeTurnStarted:
		return decode[TurnStarted](typ, data)
	case TypeTurnCompleted:
		return decode[TurnCompleted](typ, data)
	case TypeTurnInterrupted:
		return decode[TurnInterrupted](typ, data)
	case TypeActiveProcessesChanged:
		return decode[ActiveProcessesChanged](typ, data)
	case TypeActivityRecorded:
		return decode[ActivityRecorded](typ, data)
	case TypeExpiryFinalized:
		return decode[ExpiryFinalized](typ, data)
	case TypeEntryPruned:
		return decode[EntryPruned](typ, data)
	case TypeModelOverrideSet:
		return decode[ModelOverrideSet](typ, data)
	case TypeEntryMetadataSet:
		return decode[EntryMetadataSet](typ, data)
	case TypeNoticeDelivered:
		return decode[NoticeDelivered](typ, data)
	case TypeQueueItemAdded:
		return decode[QueueItemAdded](typ, data)
	case TypeQueueItemTaken:
		return decode[QueueItemTaken](typ, data)
	case TypeQueueCleared:
		return decode[QueueCleared](typ, data)
	case TypeQueueItemsExpired:
		return decode[QueueItemsExpired](typ, data)
	case TypeLaneImported:
		return decode[LaneImported](typ, data)
	case TypeSessionCompressed:
		return decode[SessionCompressed](typ, data)
	case TypeFreshResetConsumed:
		return decode[FreshResetConsumed](typ, data)

	case TypeMessageAppended:
		return decodeStrictFirst[MessageAppended](typ, data)
	case TypeTranscriptRewritten:
		return decode[TranscriptRewritten](typ, data)
	case TypeTurnsRewound:
		return decode[TurnsRewound](typ, data)
	case TypeTitleSet:
		return decode[TitleSet](typ, data)
	case TypeSessionMetadataUpdated:
		return decode[SessionMetadataUpdated](typ, data)
	case TypeTranscriptCleared:
		return decode[TranscriptCleared](typ, data)
	case TypeTranscriptDeleted:
		return decode[TranscriptDeleted](typ, data)
	case TypeTranscriptEnded:
		return decode[TranscriptEnded](typ, data)
	case TypeTranscriptReopened:
		return decode[TranscriptReopened](typ, data)
	case TypeTurnFenced:
		return decode[TurnFenced](typ, data)
	case TypeSessionImported:
		return decode[SessionImported](typ, data)
	case TypeMessagesImported:
		return decode[MessagesImported](typ, data)
	case TypeTranscriptErased:
		return decode[TranscriptErased](typ, data)
	case TypeLaneErased:
		return decode[LaneErased](typ, data)
	case TypeErasureRequested:
		return decode[ErasureRequested](typ, data)
	case TypeErasureCompleted:
		return decode[ErasureCompleted](typ, data)
	case TypeTranscriptOpened:
		return decode[TranscriptOpened](typ, data)
	case TypeArchivedSet:
		return decode[ArchivedSet](typ, data)
	case TypeSessionMetaSet:
		return decode[SessionMetaSet](typ, data)
	case TypeHandoffRequested:
		return decode[HandoffRequested](typ, data)
	case TypeHandoffClaimed:
		return decode[HandoffClaimed](typ, data)
	case TypeHandoffCompleted:
		return decode[HandoffCompleted](typ, data)
	case TypeHandoffFailed:
		return decode[HandoffFailed](typ, data)
	case TypeMetaSet:
		return decode[MetaSet](typ, data)
	case TypeTopicModeEnabled:
		return decode[TopicModeEnabled](typ, data)
	case TypeTopicModeDisabled:
		return decode[TopicModeDisabled](typ, data)
	case TypeTopicBound:
		return decode[TopicBound](typ, data)
	case TypeTopicsErased:
		return decode[TopicsErased](typ, data)

	case TypeGatewayStarted:
		return decode[GatewayStarted](typ, data)
	case TypeRunInterrupted:
		return decode[RunInterrupted](typ, data)
	case TypeDrainStarted:
		return decode[DrainStarted](typ, data)
	case TypeDrainFinished:
		return decode[DrainFinished](typ, data)
	case TypeGatewayStopped:
		return decode[GatewayStopped](typ, data)
	case TypeMarkerHonoured:
		return decode[MarkerHonoured](typ, data)
	case TypeAutoPruneRan:
		return decode[AutoPruneRan](typ, data)
	case TypeRunAdopted:
		return decode[RunAdopted](typ, data)
	case TypeGatewayRunStarted:
		return decode[GatewayRunStarted](typ, data)
	case TypeGatewayRunStopped:
		return decode[GatewayRunStopped](typ, data)
	case TypeGatewayRunLost:
		return decode[GatewayRunLost](typ, data)

	case TypeLeaseAcquired:
		return decode[LeaseAcquired](typ, data)
	case TypeLeaseRenewed:
		return decode[LeaseRenewed](typ, data)
	case TypeLeaseReleased:
		return decode[LeaseReleased](typ, data)
	}
	return nil, fmt.Errorf("decode %q: %w", typ, ErrUnknownType)
}

// upcastSuspendedV1: v1 suspensions were written only by /stop, before the
// stuck-loop escalation gave suspensions a second cause.
func upcastSuspendedV1(old SuspendedV1) Suspended {
	return Suspended{Reason: SuspendStopCommand, At: old.At}
}

func decode[E Event](typ string, data []byte) (Event, error) {
	var e E
	if err := unmarshal(typ, data, &e); err != nil {
		return nil, err
	}
	return e, nil
}

// A catch-up or a rebuild decodes every event of the log; most are
// message_appended, and every one has metadata. For those two, JSON v2 (Go
// 1.27's encoding/json/v2) decodes first, in one pass: with strictStored it
// accepts only what it decodes exactly as encoding/json does (every name
// spelt as Encode spells it and given once, valid UTF-8, no lone surrogate
// escape). Anything else (an older shape, a name in another case, an
// unknown field, invalid text an older build stored, bad JSON) goes to
// encoding/json, which gives the value or the error it always gave
// (TestStrictFirstEqualsEncodingJSON and its fuzzers).
//
// BenchmarkDecodeMessageAppended: Decode of a typical message ~1.2 µs and 3
// allocations, against ~2.9 µs and 10 with encoding/json alone. A
// hand-written decoder of the two shapes was faster still (~0.7 µs; metadata
// ~0.2 µs against ~0.5 µs), but it did not show where it counts: a
// rebuild of 100,000 events (BenchmarkRebuild, 8 alternating runs each)
// took a median 3.64 CPU-s with it and 3.60 without, within a spread of
// 3.0 to 4.9. So the library does the job.

// strictStored are JSON v2's defaults (names exact, no duplicate name,
// valid UTF-8, no lone surrogate) with unknown members refused, and times
// read by time.Time's own UnmarshalJSON, as encoding/json reads them (JSON
// v2 would unescape the string first, and take "…45\u005a" for "…45Z").
var strictStored = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFunc(func(data []byte, t *time.Time) error { return t.UnmarshalJSON(data) })),
)

// decodeStrictFirst decodes with JSON v2 and strictStored, then, if that
// refuses data, as decode does.
func decodeStrictFirst[E Event](typ string, data []byte) (Event, error) {
	var e E
	if jsonv2.Unmarshal(data, &e, strictStored) == nil {
		return e, nil
	}
	return decode[E](typ, data)
}

// DecodeMetadata decodes an event's stored metadata (JSON v2 first, as for
// message_appended).
func DecodeMetadata(data []byte) (Metadata, error) {
	var md Metadata
	if jsonv2.Unmarshal(data, &md, strictStored) == nil {
		return md, nil
	}
	md = Metadata{}
	if err := json.Unmarshal(data, &md); err != nil {
		return Metadata{}, err
	}
	return md, nil
}

func unmarshal(typ string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", typ, err)
	}
	return nil
}

// SchemaVersionOf is the version suffix of a persisted type name ("x.v2" → 2);
// 0 when the name has none.
func SchemaVersionOf(typ string) int {
	i := strings.LastIndex(typ, ".v")
	if i < 0 {
		return 0
	}
	digits := typ[i+2:]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0
	}
	return n
}
