package commands

import (
	"crypto/sha1"
	"strconv"

	"github.com/google/uuid"
)

// eventIDNamespace scopes derived event ids to hermes.
var eventIDNamespace = uuid.MustParse("6f1c2d9e-7a43-4c1b-9e2f-5d8a0b3c4e71")

// eventID derives the id of the i-th event a command appends to stream, so
// that a retried command proposes the same ids and the store de-duplicates.
// It is uuid.NewSHA1(eventIDNamespace, commandID NUL stream NUL i),
// computed without the hash object NewSHA1 allocates each time. Ids of
// commands whose id the caller gave are this, forever: a retry that spans
// an upgrade must still propose the ids the first attempt stored.
func eventID(commandID, stream string, i int) string {
	sum := eventIDHash(commandID, stream, i)
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = (id[6] & 0x0f) | 0x50 // version 5 (name-based, SHA-1)
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id.String()
}

// orderedEventID derives the id of the i-th event a command appends to
// stream from the command's time-ordered id (a UUIDv7): its first 8 bytes
// (the millisecond and the sequence within it, rising within this process)
// are the command's, the last 8 the hash eventID takes. The ids of a
// process's commands therefore rise with time, and the log's unique index
// of event ids takes them at one place instead of at random pages all over
// it: a restart sweep of 10,000 lanes wrote a page of that index for every
// few lanes. They stay unique: a command's id is unique, and its events'
// hashes differ by stream and i.
func orderedEventID(order uuid.UUID, commandID, stream string, i int) string {
	sum := eventIDHash(commandID, stream, i)
	var id uuid.UUID
	copy(id[:8], order[:8])
	copy(id[8:], sum[8:16])
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant; the version is order's (7)
	return id.String()
}

// eventIDHash is SHA-1(eventIDNamespace, commandID NUL stream NUL i).
func eventIDHash(commandID, stream string, i int) [sha1.Size]byte {
	var buf [256]byte
	name := append(buf[:0], eventIDNamespace[:]...)
	name = append(append(append(append(name, commandID...), 0), stream...), 0)
	return sha1.Sum(strconv.AppendInt(name, int64(i), 10))
}

// commandIdentity is the id of one command and the rule its events' ids
// follow.
type commandIdentity struct {
	id string
	// order is set when the caller gave no command id: id was made for
	// this call alone and no retry will ever propose it again, so the
	// events' ids need not be eventID's and take order's time instead
	// (orderedEventID).
	order uuid.UUID
}

// identify is the identity of a command whose caller gave commandID: that
// id, or, when empty, a fresh time-ordered one.
func identify(commandID string) commandIdentity {
	if commandID != "" {
		return commandIdentity{id: commandID}
	}
	order := newOrder()
	return commandIdentity{id: order.String(), order: order}
}

// generated names a command whose id this process made up (id) for one
// call, its events ordered by a fresh UUIDv7.
func generated(id string) commandIdentity {
	return commandIdentity{id: id, order: newOrder()}
}

// newOrder is a fresh UUIDv7: after every one this process made before.
func newOrder() uuid.UUID {
	// NewV7 fails only when crypto/rand does, which since Go 1.24 never
	// returns an error (it aborts the program).
	return uuid.Must(uuid.NewV7())
}

// eventID is the id of the i-th event the command appends to stream.
func (c commandIdentity) eventID(stream string, i int) string {
	if c.order == uuid.Nil {
		return eventID(c.id, stream, i)
	}
	return orderedEventID(c.order, c.id, stream, i)
}
