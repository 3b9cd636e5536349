package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode"
)

// MaxTitleLength is the longest title Hermes accepts, in characters.
const MaxTitleLength = 100

// ErrTitleTooLong: a title is longer than [MaxTitleLength] once cleaned.
// The error returned wraps it in a [TitleTooLongError].
var ErrTitleTooLong = errors.New("title too long")

// TitleTooLongError carries the length of a refused title; its text is
// Hermes' ("Title too long (N chars, max 100)").
type TitleTooLongError struct {
	Length int
}

func (e *TitleTooLongError) Error() string {
	return fmt.Sprintf("Title too long (%d chars, max %d)", e.Length, MaxTitleLength)
}

// Is makes errors.Is(err, ErrTitleTooLong) true.
func (e *TitleTooLongError) Is(target error) bool { return target == ErrTitleTooLong }

// SanitizeTitle is Hermes' sanitize_title: it removes ASCII control
// characters (but turns tabs and newlines into spaces with the rest of
// the whitespace), zero-width, direction and other invisible formatting
// characters, collapses whitespace runs to one space and trims. An empty
// result is "" (no title: it clears one); a result longer than 100
// characters is a [*TitleTooLongError].
func SanitizeTitle(title string) (string, error) {
	if title == "" {
		return "", nil
	}
	var b strings.Builder
	space := false
	for _, r := range title {
		if invisibleInTitle(r) {
			continue
		}
		if titleSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	cleaned := b.String()
	if n := runeLen(cleaned); n > MaxTitleLength {
		return "", &TitleTooLongError{Length: n}
	}
	return cleaned, nil
}

// invisibleInTitle lists what sanitize_title deletes outright: ASCII
// controls other than \t \n \r, and U+200B–200F, U+2028–202E,
// U+2060–2069, U+FEFF, U+FFFC, U+FFF9–FFFB.
func invisibleInTitle(r rune) bool {
	switch {
	case r <= 0x08, r == 0x0b, r == 0x0c, r >= 0x0e && r <= 0x1f, r == 0x7f:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2060 && r <= 0x2069:
		return true
	case r == 0xfeff, r == 0xfffc, r >= 0xfff9 && r <= 0xfffb:
		return true
	}
	return false
}

// titleSpace is Python's \s (str.isspace) for what is left after the
// deletions above.
func titleSpace(r rune) bool {
	return unicode.IsSpace(r)
}

// TitleOwner returns the session that holds title, or [ErrNotFound]. The
// command layer checks it before deciding a TitleSet (Hermes' "Title '<t>'
// is already in use by session <id>"; re-setting a session's own title is
// fine).
func (r *Reader) TitleOwner(ctx context.Context, title string) (string, error) {
	var id string
	err := r.db.QueryRowContext(ctx, "SELECT id FROM sessions WHERE title = ?", title).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("title %q: %w", title, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("title %q: %w", title, err)
	}
	return id, nil
}

// ResolveTitle is Hermes' resolve_session_by_title with the unique-prefix
// fallback of Hermes #14411: if any title is "<title> #<something>", the
// newest such session by started_at (not the highest number); else the
// session titled exactly title; else the only session whose title starts
// with title (titles are shown truncated in lists). Otherwise
// [ErrNotFound]. LIKE wildcards in title are literal.
func (r *Reader) ResolveTitle(ctx context.Context, title string) (string, error) {
	var id string
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx,
			`SELECT id FROM sessions WHERE title LIKE ? ESCAPE '\' ORDER BY started_at DESC, id DESC LIMIT 1`,
			escapeLike(title)+" #%").Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		err = tx.QueryRowContext(ctx, "SELECT id FROM sessions WHERE title = ?", title).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if title == "" {
			return ErrNotFound
		}
		id, err = uniqueMatch(ctx, tx,
			`SELECT id FROM sessions WHERE title LIKE ? ESCAPE '\' LIMIT 2`, escapeLike(title)+"%")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("resolve title %q: %w", title, err)
	}
	return id, nil
}

var (
	numberedTitle = regexp.MustCompile(`^(.*?) #(\d+)$`)
	titleNumber   = regexp.MustCompile(`^.* #(\d+)$`)
)

// NextTitle is Hermes' get_next_title_in_lineage: the title for the next
// session of a lineage. A trailing " #N" of base is dropped; if no title is
// the base or "<base> #…", the base itself; otherwise "<base> #<max+1>",
// where the unnumbered original counts as #1.
func (r *Reader) NextTitle(ctx context.Context, base string) (string, error) {
	if m := numberedTitle.FindStringSubmatch(base); m != nil {
		base = m[1]
	}
	rows, err := r.db.QueryContext(ctx,
		`SELECT title FROM sessions WHERE title = ? OR title LIKE ? ESCAPE '\'`, base, escapeLike(base)+" #%")
	if err != nil {
		return "", fmt.Errorf("next title %q: %w", base, err)
	}
	defer rows.Close()
	found := false
	highest := big.NewInt(1)
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return "", fmt.Errorf("next title %q: %w", base, err)
		}
		found = true
		if m := titleNumber.FindStringSubmatch(t); m != nil {
			n, _ := new(big.Int).SetString(m[1], 10)
			if n.Cmp(highest) > 0 {
				highest = n
			}
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("next title %q: %w", base, err)
	}
	if !found {
		return base, nil
	}
	return fmt.Sprintf("%s #%s", base, new(big.Int).Add(highest, big.NewInt(1))), nil
}
