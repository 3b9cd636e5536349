package sqlite

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// damage latches the first sign that the log is damaged: SQLite's
// corruption error met by a write, a read or a subscription, or a
// [Store.Verify] that found damage. From then on every write is refused
// with ErrDamaged: a damaged b-tree can take a write (an index page whose
// cells were overwritten is not noticed by an INSERT) and lose it or
// damage more later, so nothing more is acknowledged. Reads go on, and
// fail where they meet the damage.
type damage struct{ first atomic.Pointer[error] }

// note latches err if it says the file is damaged.
func (d *damage) note(err error) {
	if err != nil && IsDamaged(err) {
		d.first.CompareAndSwap(nil, &err)
	}
}

// refusal is the error every write gets once damage was met, nil before.
func (d *damage) refusal() error {
	p := d.first.Load()
	if p == nil {
		return nil
	}
	cause := strings.TrimPrefix((*p).Error(), ErrDamaged.Error()+": ")
	return fmt.Errorf("%w (%s): hermes takes no more writes to it; see the damage with 'hermes check', "+
		"restore a backup with 'hermes restore <backup> --force', or salvage what reads with 'hermes check --salvage <new file>'", ErrDamaged, cause)
}

// Damaged is the error writes are refused with since the store met damage
// in the log, or nil.
func (s *Store) Damaged() error { return s.damage.refusal() }

// Verify examines the whole log as 'hermes check' does ([Check]: SQLite's
// integrity check, then every event read and decoded, positions and
// versions without holes) on a read-only connection of its own, while the
// store serves. Damage found latches: every later write is refused
// (ErrDamaged), and Verify returns that error with the report. It reads
// the whole file: seconds for a million events.
func (s *Store) Verify(ctx context.Context) (CheckReport, error) {
	rep, err := Check(ctx, s.path, CheckOptions{})
	if err != nil {
		s.damage.note(err)
		return rep, err
	}
	if !rep.OK() {
		// The findings, without the first line (the file's path and
		// counts): the refusal goes to API clients too.
		lines := strings.Split(strings.TrimSpace(rep.Summary()), "\n")
		found := strings.Join(lines[min(1, len(lines)-1):], "; ")
		s.damage.note(fmt.Errorf("%w: %s", ErrDamaged, found))
		return rep, s.damage.refusal()
	}
	return rep, nil
}
