package sessions

import (
	"encoding/json"
	"fmt"
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
	active_processes, open_turn_id, turn_started_at, had_activity, pruned`

const lanePlaceholders = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

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
	return []any{
		l.SessionKey, int64(r.Version), l.SessionID, nanos(l.CreatedAt), nanos(l.UpdatedAt), string(origin),
		l.DisplayName, l.Platform, l.ChatType, l.InputTokens, l.OutputTokens, l.CacheReadTokens,
		l.CacheWriteTokens, l.TotalTokens, l.EstimatedCostUSD, l.CostStatus, l.LastPromptTokens,
		l.WasAutoReset, l.AutoResetReason, l.ResetHadActivity, l.IsFreshReset, l.ExpiryFinalized,
		l.Suspended, l.SuspendReason, l.ResumePending, l.ResumeReason, nanos(l.LastResumeMarkedAt),
		l.PreviousSessionID, l.ActiveProcesses, l.OpenTurnID, nanos(l.TurnStartedAt), l.HadActivity, l.Pruned,
	}, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanLane(s scanner) (Row, error) {
	var (
		r                                     Row
		l                                     domain.Lane
		version                               int64
		created, updated, marked, turnStarted int64
		origin                                string
	)
	err := s.Scan(&l.SessionKey, &version, &l.SessionID, &created, &updated, &origin,
		&l.DisplayName, &l.Platform, &l.ChatType, &l.InputTokens, &l.OutputTokens, &l.CacheReadTokens,
		&l.CacheWriteTokens, &l.TotalTokens, &l.EstimatedCostUSD, &l.CostStatus, &l.LastPromptTokens,
		&l.WasAutoReset, &l.AutoResetReason, &l.ResetHadActivity, &l.IsFreshReset, &l.ExpiryFinalized,
		&l.Suspended, &l.SuspendReason, &l.ResumePending, &l.ResumeReason, &marked,
		&l.PreviousSessionID, &l.ActiveProcesses, &l.OpenTurnID, &turnStarted, &l.HadActivity, &l.Pruned)
	if err != nil {
		return Row{}, err
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
