package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"hermes/events"
)

// metaNextMessageID is the state_meta key of the id the next message row
// gets, written with the checkpoint.
const metaNextMessageID = "hermes_next_message_id"

// messageIDs numbers the message rows that events insert, in log order,
// as AUTOINCREMENT would: a message_appended takes the next id, a rewrite
// of n messages the next n. The runner numbers events as it receives them
// (Assign), so an append is answered with its id while the batch holding
// it is still gathering; Apply numbers what Assign did not, in the same
// order, and inserts every row with its number. The numbers are a
// function of the log and of the committed file (whose next id is stored
// with the checkpoint): numbering again after a restart or a rolled-back
// batch gives the same ids.
//
// An import (messages_imported) keeps Hermes' ids where they are free and
// takes new ones for the others, which depends on the rows in the file:
// Assign stops before it, and Apply numbers on from the file once it has
// inserted the import's rows.
type messageIDs struct {
	mu sync.Mutex
	// next is the id the next numbered message gets.
	next int64
	// upTo is the last position numbered (or passed by Apply).
	upTo uint64
	// ranges are the numbered events not committed yet, by position.
	ranges map[uint64]MessageRange
	// held are received events Assign could not number for a gap (the
	// events before them were not numbered yet), heldAfter the position
	// before the first: Apply numbers them as soon as it closes the gap,
	// so that numbering on receipt resumes under a steady stream.
	held      []events.Envelope
	heldAfter uint64
	// appliedNext is next as it was after the last event Apply passed:
	// what the checkpoint's transaction stores; committedNext is the one
	// the last commit stored (a rolled-back batch goes back to it).
	appliedNext, committedNext int64
}

// load sets the numbering to the committed file's: its checkpoint and the
// next id stored with it (or, in a file written before it was stored, the
// next AUTOINCREMENT id).
func (ids *messageIDs) load(ctx context.Context, q queryer) error {
	cp, err := readCheckpoint(ctx, q)
	if err != nil {
		return err
	}
	next, err := storedNextID(ctx, q)
	if err != nil {
		return err
	}
	// Never below a row of the file (one written by an older build that
	// did not store the next id): its explicit ids would collide.
	fileNext, err := autoincrementNext(ctx, q)
	if err != nil {
		return err
	}
	next = max(next, fileNext)
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.next, ids.appliedNext, ids.committedNext, ids.upTo = next, next, next, cp
	ids.ranges = make(map[uint64]MessageRange)
	return nil
}

// storedNextID reads the next message id stored with the checkpoint (1
// when none is: load takes the file's rows into account).
func storedNextID(ctx context.Context, q queryer) (int64, error) {
	var v sql.NullString
	err := q.QueryRowContext(ctx, "SELECT value FROM state_meta WHERE key = ?", metaNextMessageID).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read next message id: %w", err)
	}
	if !v.Valid {
		return 1, nil
	}
	n, err := strconv.ParseInt(v.String, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("stored next message id %q is not a positive integer", v.String)
	}
	return n, nil
}

// autoincrementNext is the id AUTOINCREMENT would give the next message.
func autoincrementNext(ctx context.Context, q queryer) (int64, error) {
	var next int64
	err := q.QueryRowContext(ctx, `SELECT max(
		COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0),
		COALESCE((SELECT max(id) FROM messages), 0)) + 1`).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("read next message id: %w", err)
	}
	return next, nil
}

// assign numbers received events that follow the last one numbered
// (after is the position of the event before the first); it stops at a
// gap or an import.
func (ids *messageIDs) assign(after uint64, received []events.Envelope) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.ranges == nil {
		return // not loaded: the projection is closing or failed to open
	}
	for i, env := range received {
		if env.Position <= ids.upTo {
			after = env.Position
			continue
		}
		if after != ids.upTo {
			ids.hold(after, received[i:])
			return
		}
		if isImport(env) {
			return
		}
		ids.number(env)
		after = env.Position
	}
}

// maxHeld bounds the events held across a gap; past it they are
// forgotten (Apply numbers them, and numbering on receipt resumes at the
// next lull).
const maxHeld = 4 * 2048

// hold keeps received (after: the position before it) for numbering once
// the gap closes; ids.mu is held.
func (ids *messageIDs) hold(after uint64, received []events.Envelope) {
	switch {
	case len(ids.held) == 0:
		ids.heldAfter = after
	case ids.held[len(ids.held)-1].Position != after:
		ids.held, ids.heldAfter = ids.held[:0], after // not contiguous: start again
	}
	if len(ids.held)+len(received) > maxHeld {
		clear(ids.held)
		ids.held = ids.held[:0]
		return
	}
	ids.held = append(ids.held, received...)
}

// numberHeld numbers the held events that now follow the last one
// numbered; ids.mu is held.
func (ids *messageIDs) numberHeld() {
	n := 0
	for _, env := range ids.held {
		if env.Position <= ids.upTo {
			ids.heldAfter = env.Position
			n++
			continue
		}
		if ids.heldAfter != ids.upTo || isImport(env) {
			break
		}
		ids.number(env)
		ids.heldAfter = env.Position
		n++
	}
	if n > 0 {
		rest := copy(ids.held, ids.held[n:])
		clear(ids.held[rest:])
		ids.held = ids.held[:rest]
	}
}

// number gives env its ids; ids.mu is held.
func (ids *messageIDs) number(env events.Envelope) {
	switch e := env.Event.(type) {
	case events.MessageAppended:
		ids.ranges[env.Position] = MessageRange{SessionID: e.SessionID, FirstID: ids.next, Count: 1}
		ids.next++
	case events.TranscriptRewritten:
		if len(e.Messages) > 0 {
			ids.ranges[env.Position] = MessageRange{SessionID: e.SessionID, FirstID: ids.next, Count: len(e.Messages)}
			ids.next += int64(len(e.Messages))
		}
	}
	ids.upTo = env.Position
}

// applying returns the ids of the event Apply is at, numbering it (and
// any event Assign left) when needed. An import is not numbered here: see
// imported.
func (ids *messageIDs) applying(env events.Envelope) MessageRange {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if env.Position > ids.upTo && !isImport(env) {
		ids.number(env)
		ids.numberHeld()
	}
	r := ids.ranges[env.Position]
	if r.Count > 0 {
		ids.appliedNext = max(ids.appliedNext, r.FirstID+int64(r.Count))
	}
	return r
}

// imported numbers on after the import at pos, from fileNext (the next
// AUTOINCREMENT id once its rows are in).
func (ids *messageIDs) imported(pos uint64, fileNext int64) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if pos > ids.upTo {
		ids.next = max(ids.next, fileNext)
		ids.upTo = pos
		ids.numberHeld()
	}
	// fileNext, not next: next may count events numbered after the
	// import (a retried batch), which this batch does not commit.
	ids.appliedNext = max(ids.appliedNext, fileNext)
}

// isImport reports whether env is a messages_imported, whose ids depend
// on the rows in the file (see messageIDs).
func isImport(env events.Envelope) bool {
	_, ok := env.Event.(events.MessagesImported)
	return ok
}

// lookup returns the ids of the event at pos if it was numbered and not
// committed yet.
func (ids *messageIDs) lookup(pos uint64) (MessageRange, bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	r, ok := ids.ranges[pos]
	return r, ok && r.Count > 0
}

// nextToStore is the next id the batch's transaction stores.
func (ids *messageIDs) nextToStore() int64 {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.appliedNext
}

// rolledBack takes the next id to store back to the last commit's: the
// batch that rolled back is applied again (numbered as before), or not.
func (ids *messageIDs) rolledBack() {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.appliedNext = ids.committedNext
}

// committed forgets the ranges up to the checkpoint cp: the file answers
// for them now.
func (ids *messageIDs) committed(cp uint64) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.committedNext = ids.appliedNext
	for pos := range ids.ranges {
		if pos <= cp {
			delete(ids.ranges, pos)
		}
	}
}
