package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ListQuery filters Hermes' list_sessions_rich and session_count.
type ListQuery struct {
	Source          string
	ExcludeSources  []string
	Limit, Offset   int
	IncludeChildren bool
	MinMessageCount int
	OrderByActive   bool
	IncludeArchived bool
	ArchivedOnly    bool
	// IDQuery keeps sessions whose id contains it (case-insensitive; LIKE
	// wildcards in it are literal).
	IDQuery string
	// Empty keeps only ended, unarchived sessions without messages (Hermes'
	// count_empty_sessions and delete_empty_sessions).
	Empty bool
}

// listableChild keeps roots and the children of a branched parent: a
// subagent run or a compression continuation is not listed on its own.
const listableChild = `(s.parent_session_id IS NULL OR EXISTS (SELECT 1 FROM sessions bp
	WHERE bp.id = s.parent_session_id AND bp.end_reason = 'branched'))`

func (q ListQuery) where() (string, []any) {
	var clauses []string
	var args []any
	if !q.IncludeChildren {
		clauses = append(clauses, listableChild)
	}
	if q.Source != "" {
		clauses = append(clauses, "s.source = ?")
		args = append(args, q.Source)
	}
	if len(q.ExcludeSources) > 0 {
		clauses = append(clauses, "s.source NOT IN ("+placeholders(len(q.ExcludeSources))+")")
		args = append(args, anySlice(q.ExcludeSources)...)
	}
	if q.MinMessageCount > 0 {
		clauses = append(clauses, "s.message_count >= ?")
		args = append(args, q.MinMessageCount)
	}
	switch {
	case q.ArchivedOnly:
		clauses = append(clauses, "s.archived = 1")
	case !q.IncludeArchived:
		clauses = append(clauses, "s.archived = 0")
	}
	if q.IDQuery != "" {
		clauses = append(clauses, `LOWER(s.id) LIKE ? ESCAPE '\'`)
		args = append(args, "%"+escapeLike(strings.ToLower(q.IDQuery))+"%")
	}
	if q.Empty {
		clauses = append(clauses, "s.message_count = 0 AND s.ended_at IS NOT NULL")
	}
	if len(clauses) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(clauses, " AND "), args
}

// previewChars is the length of a listing's preview, as in Hermes.
const previewChars = 60

// ListSessions is Hermes' list_sessions_rich: session rows (every column,
// as Hermes' dicts) with preview (the first user message, newlines as
// spaces, 60 characters and "..." when longer) and last_active (the last
// message's time, else the start).
func (r *Reader) ListSessions(ctx context.Context, q ListQuery) ([]map[string]any, error) {
	where, args := q.where()
	order := " ORDER BY s.started_at DESC, s.id DESC"
	if q.OrderByActive {
		order = " ORDER BY last_active DESC, s.started_at DESC, s.id DESC"
	}
	query := `SELECT s.*,
		COALESCE((SELECT SUBSTR(REPLACE(REPLACE(m.content, X'0A', ' '), X'0D', ' '), 1, 200) FROM messages m
			WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
			ORDER BY m.timestamp, m.id LIMIT 1), '') AS preview,
		COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id), s.started_at) AS last_active
		FROM sessions s` + where + order + " LIMIT ? OFFSET ?"
	args = append(args, q.Limit, q.Offset)
	var out []map[string]any
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanMaps(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	for _, row := range out {
		row["preview"] = preview(row["preview"])
	}
	return out, nil
}

func preview(v any) string {
	s, _ := v.(string)
	if strings.HasPrefix(s, "\x00json:") {
		return "" // a list of parts, stored as JSON: Hermes shows its raw text; hermes none
	}
	s = strings.TrimSpace(s)
	rs := []rune(s)
	if len(rs) > previewChars {
		return string(rs[:previewChars]) + "..."
	}
	return s
}

// scanMaps reads every row as column name → value (text as string).
func scanMaps(rows *sql.Rows) ([]map[string]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// CountSessions is Hermes' session_count (with Empty: count_empty_sessions).
func (r *Reader) CountSessions(ctx context.Context, q ListQuery) (int64, error) {
	where, args := q.where()
	var n int64
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM sessions s"+where, args...).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// SessionIDs lists the ids q selects, oldest first (for the bulk deletes).
func (r *Reader) SessionIDs(ctx context.Context, q ListQuery) ([]string, error) {
	where, args := q.where()
	var out []string
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT s.id FROM sessions s"+where+" ORDER BY s.started_at, s.id", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list session ids: %w", err)
	}
	return out, nil
}

// CountMessages is Hermes' message_count: every stored message (rewound
// ones too), of one session when sessionID is not "".
func (r *Reader) CountMessages(ctx context.Context, sessionID string) (int64, error) {
	q, args := "SELECT COUNT(*) FROM messages", []any{}
	if sessionID != "" {
		q, args = q+" WHERE session_id = ?", append(args, sessionID)
	}
	var n int64
	err := r.readTx(ctx, func(tx *sql.Tx) error { return tx.QueryRowContext(ctx, q, args...).Scan(&n) })
	if err != nil {
		return 0, fmt.Errorf("count messages: %w", err)
	}
	return n, nil
}

// SessionByTitle is Hermes' get_session_by_title: the row with exactly
// that title (every column), or nil.
func (r *Reader) SessionByTitle(ctx context.Context, title string) (map[string]any, error) {
	var out []map[string]any
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT * FROM sessions WHERE title = ? LIMIT 1", title)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanMaps(rows)
		return err
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return out[0], nil
}

// maxChainHops bounds the walks along compression chains (Hermes: 100 for
// the tip, 32 for the resume target).
const (
	maxChainHops  = 100
	maxResumeHops = 32
)

// CompressionTip is Hermes' get_compression_tip: the latest continuation
// of id's compression chain (a child started after its parent ended with
// end_reason "compression"), or id itself.
func (r *Reader) CompressionTip(ctx context.Context, id string) (string, error) {
	current := id
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		for range maxChainHops {
			var next string
			err := tx.QueryRowContext(ctx, `SELECT id FROM sessions WHERE parent_session_id = ?
				AND started_at >= (SELECT ended_at FROM sessions WHERE id = ? AND end_reason = 'compression')
				ORDER BY started_at DESC LIMIT 1`, current, current).Scan(&next)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			current = next
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("compression tip of %s: %w", id, err)
	}
	return current, nil
}

// ResumeTarget is Hermes' resolve_resume_session_id: id when it has
// messages; else the first descendant (following the latest-started child
// at each step) that has any; else id.
func (r *Reader) ResumeTarget(ctx context.Context, id string) (string, error) {
	out := id
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		has := func(sid string) (bool, error) {
			var one int
			err := tx.QueryRowContext(ctx, "SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", sid).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return err == nil, err
		}
		if ok, err := has(id); ok || err != nil {
			return err
		}
		seen := map[string]bool{id: true}
		current := id
		for range maxResumeHops {
			var child string
			err := tx.QueryRowContext(ctx, "SELECT id FROM sessions WHERE parent_session_id = ? ORDER BY started_at DESC, id DESC LIMIT 1",
				current).Scan(&child)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			if child == "" || seen[child] {
				return nil
			}
			seen[child] = true
			ok, err := has(child)
			if err != nil {
				return err
			}
			if ok {
				out = child
				return nil
			}
			current = child
		}
		return nil
	})
	if err != nil {
		return id, fmt.Errorf("resume target of %s: %w", id, err)
	}
	return out, nil
}
