package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"hermes/domain"
	"hermes/events"
)

// laneColumns lists the lanes columns in the order of laneValues and scanLane.
const laneColumns = `session_key, version, session_id, created_at, updated_at, origin, display_name,
	platform, chat_type, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	total_tokens, estimated_cost_usd, cost_status, last_prompt_tokens, was_auto_reset,
	auto_reset_reason, reset_had_activity, is_fresh_reset, expiry_finalized, suspended,
	suspend_reason, resume_pending, resume_reason, last_resume_marked_at, previous_session_id,
	active_processes, open_turn_id, turn_started_at, had_activity, pruned, model_override, metadata`

const lanePlaceholders = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

// Row is a lane as the read model holds it: the lane state and the stream
// version it reflects.
type Row struct {
	Lane    domain.Lane
	Version uint64
}

func laneValues(r Row) ([]any, error) {
	l := r.Lane
	origin, err := json.Marshal(events.Source(l.Origin))
	if err != nil {
		return nil, fmt.Errorf("encode origin of %s: %w", l.SessionKey, err)
	}
	override, metadata, err := entryStateColumns(l)
	if err != nil {
		return nil, fmt.Errorf("encode entry state of %s: %w", l.SessionKey, err)
	}
	return []any{
		l.SessionKey, int64(r.Version), l.SessionID, nanos(l.CreatedAt), nanos(l.UpdatedAt), string(origin),
		l.DisplayName, l.Platform, l.ChatType, l.InputTokens, l.OutputTokens, l.CacheReadTokens,
		l.CacheWriteTokens, l.TotalTokens, l.EstimatedCostUSD, l.CostStatus, l.LastPromptTokens,
		l.WasAutoReset, l.AutoResetReason, l.ResetHadActivity, l.IsFreshReset, l.ExpiryFinalized,
		l.Suspended, l.SuspendReason, l.ResumePending, l.ResumeReason, nanos(l.LastResumeMarkedAt),
		l.PreviousSessionID, l.ActiveProcesses, l.OpenTurnID, nanos(l.TurnStartedAt), l.HadActivity, l.Pruned,
		override, metadata,
	}, nil
}

// entryStateColumns are the model_override and metadata columns of a lane:
// "" for none, else JSON (the override's object; the metadata as an object
// of its values, written without HTML escapes so they keep their bytes).
func entryStateColumns(l domain.Lane) (override, metadata string, err error) {
	if l.ModelOverride != nil {
		b, err := json.Marshal(l.ModelOverride)
		if err != nil {
			return "", "", err
		}
		override = string(b)
	}
	if l.Metadata != nil {
		m := make(map[string]json.RawMessage, len(l.Metadata))
		for _, it := range l.Metadata {
			m[it.Key] = it.Value
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			return "", "", err
		}
		metadata = strings.TrimSuffix(buf.String(), "\n")
	}
	return override, metadata, nil
}

// scanEntryState reads the columns entryStateColumns wrote into l.
func scanEntryState(l *domain.Lane, override, metadata string) error {
	if override != "" {
		l.ModelOverride = new(domain.ModelOverride)
		if err := json.Unmarshal([]byte(override), l.ModelOverride); err != nil {
			return fmt.Errorf("decode model override: %w", err)
		}
	}
	if metadata != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(metadata), &m); err != nil {
			return fmt.Errorf("decode metadata: %w", err)
		}
		l.Metadata = make([]domain.MetadataItem, 0, len(m))
		for k, v := range m {
			l.Metadata = append(l.Metadata, domain.MetadataItem{Key: k, Value: v})
		}
		slices.SortFunc(l.Metadata, func(a, b domain.MetadataItem) int { return strings.Compare(a.Key, b.Key) })
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

func scanLane(s scanner) (Row, error) {
	var (
		r                                     Row
		l                                     domain.Lane
		version                               int64
		created, updated, marked, turnStarted int64
		origin, override, metadata            string
	)
	err := s.Scan(&l.SessionKey, &version, &l.SessionID, &created, &updated, &origin,
		&l.DisplayName, &l.Platform, &l.ChatType, &l.InputTokens, &l.OutputTokens, &l.CacheReadTokens,
		&l.CacheWriteTokens, &l.TotalTokens, &l.EstimatedCostUSD, &l.CostStatus, &l.LastPromptTokens,
		&l.WasAutoReset, &l.AutoResetReason, &l.ResetHadActivity, &l.IsFreshReset, &l.ExpiryFinalized,
		&l.Suspended, &l.SuspendReason, &l.ResumePending, &l.ResumeReason, &marked,
		&l.PreviousSessionID, &l.ActiveProcesses, &l.OpenTurnID, &turnStarted, &l.HadActivity, &l.Pruned,
		&override, &metadata)
	if err != nil {
		return Row{}, err
	}
	if err := scanEntryState(&l, override, metadata); err != nil {
		return Row{}, fmt.Errorf("lane %s: %w", l.SessionKey, err)
	}
	var src events.Source
	if err := json.Unmarshal([]byte(origin), &src); err != nil {
		return Row{}, fmt.Errorf("decode origin of %s: %w", l.SessionKey, err)
	}
	l.Origin = domain.SessionSource(src)
	l.CreatedAt, l.UpdatedAt = fromNanos(created), fromNanos(updated)
	l.LastResumeMarkedAt, l.TurnStartedAt = fromNanos(marked), fromNanos(turnStarted)
	r.Lane, r.Version = l, uint64(version)
	return r, nil
}

// nanos stores a time as UTC unix nanoseconds; the zero time as 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
