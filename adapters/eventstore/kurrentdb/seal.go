package kurrentdb

import (
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// Crypto-shredding (docs/ERASURE.md, KurrentDB). KurrentDB cannot rewrite
// an event, so an event holding personal content (events.PersonalClass) is
// written twice over in one record: its data is the whole event sealed with
// AES-256-GCM under the key of its (stream, class) (nonce, then
// ciphertext), and its metadata carries, next to the event's metadata, the
// event as the erasure of its class would leave it (the "shadow", readable
// by anything) as plain JSON. The keys of a (stream, class) are the events of its
// key stream, newest last; an erasure appends a new key and truncates the
// key stream before it ($tb), so every older key is unreadable through the
// server's API at once, and gone from its storage after the next scavenge
// (Purge). A record whose key is unreadable decodes as its shadow, with
// Metadata.Redacted set: what the embedded store's rewrite in place leaves.

// keyStreamPrefix names the key streams: hermeskeys-<class>@<stream>. They
// are not hermes' streams: $all reads and subscriptions never return them.
const keyStreamPrefix = "hermeskeys-"

// keyEventType is the type of a key stream's events.
const keyEventType = "hermes.key.v1"

// keyRecord is a key stream's event.
type keyRecord struct {
	Key []byte `json:"key"`
	// ErasedBy is the id of the erasure event that retired the keys
	// before this one (empty for the first key).
	ErasedBy string `json:"erased_by,omitempty"`
	// Earlier are the erasures of the key stream before ErasedBy, oldest
	// first (up to maxEarlier): each retired the keys before the one it
	// made. An event reads as erased by the first erasure after its key,
	// as the embedded store's rewrite names the first erasure that
	// changed it.
	Earlier []retirement `json:"earlier,omitempty"`
}

// retirement is an erasure of a key stream: By made the key at revision
// Key and retired every key before it.
type retirement struct {
	Key uint64 `json:"key"`
	By  string `json:"by"`
}

// maxEarlier bounds the erasures a key remembers; an event sealed under a
// key older than all of them reads as erased by the oldest remembered.
const maxEarlier = 256

// destroyerOf is the erasure that destroyed the key at revision rev, as
// the key record r (a later key) tells it.
func (r keyRecord) destroyerOf(rev uint64) string {
	for _, e := range r.Earlier {
		if e.Key > rev {
			return e.By
		}
	}
	return r.ErasedBy
}

// sealedPart is the metadata field of a sealed record: which key sealed
// its data.
type sealedPart struct {
	Class string `json:"class"`
	// Key is the revision of the key in its key stream.
	Key uint64 `json:"key"`
}

// storedMetadata is a record's metadata: the event's, plus, when its data
// is sealed, the key and the shadow.
type storedMetadata struct {
	events.Metadata
	Sealed *sealedPart     `json:"hermes_sealed,omitempty"`
	Shadow json.RawMessage `json:"hermes_shadow,omitempty"`
}

func (s *Store) keyStream(stream, class string) string {
	return s.namespace + keyStreamPrefix + class + "@" + stream
}

// streamKey is the key of a (stream, class) at a revision of its key
// stream.
type streamKey struct {
	rev uint64
	key []byte
}

// sealPlan says which events of an append hold personal content.
type sealPlan struct {
	classes []string // per event; "" for none
	shadows []events.Event
	// erasedAt[c] is the index of the last erasure of class c in the
	// append: events of c before it are written erased.
	erasedAt map[string]int
	erasures map[int][]string // event index -> classes it erases
}

func planSeal(proposed []events.Proposed) sealPlan {
	p := sealPlan{classes: make([]string, len(proposed)), shadows: make([]events.Event, len(proposed))}
	for i, e := range proposed {
		p.classes[i], p.shadows[i] = events.PersonalClass(e.Event)
		if x, ok := e.Event.(events.Erasure); ok {
			if cs := events.ErasedClasses(x); len(cs) > 0 {
				if p.erasures == nil {
					p.erasures, p.erasedAt = map[int][]string{}, map[string]int{}
				}
				p.erasures[i] = cs
				for _, c := range cs {
					p.erasedAt[c] = i
				}
			}
		}
	}
	return p
}

// needed reports whether the append seals or erases anything.
func (p sealPlan) needed() bool {
	if len(p.erasures) > 0 {
		return true
	}
	for _, c := range p.classes {
		if c != "" {
			return true
		}
	}
	return false
}

// seal turns the plain records of an append into sealed ones, after it
// destroyed the keys its erasures name. It must run after the stream's
// tail was read, and its result must be appended with an exact expected
// revision: an event sealed under a key older than an erasure then can
// only land before that erasure.
//
// meta encodes the metadata of each event it seals or writes erased; nil
// is json.Marshal (Append's).
func (s *Store) seal(ctx context.Context, stream string, proposed []events.Proposed, data []esdb.EventData, p sealPlan, current uint64, tail []stored, meta func(i int, md storedMetadata) ([]byte, error)) ([]esdb.EventData, error) {
	if meta == nil {
		meta = func(_ int, md storedMetadata) ([]byte, error) { return json.Marshal(md) }
	}
	keys := map[string]streamKey{}
	// Erasures first: every key of their classes, up to now, goes.
	for i := range proposed {
		for _, c := range p.erasures[i] {
			k, err := s.shred(ctx, stream, c, proposed[i].ID)
			if err != nil {
				return nil, fmt.Errorf("erase %s %s: %w", stream, c, err)
			}
			keys[c] = k
			s.remember(stream, c, k, current)
		}
	}
	out := make([]esdb.EventData, len(data))
	copy(out, data)
	for i, class := range p.classes {
		if class == "" {
			continue
		}
		shadow, err := events.Encode(p.shadows[i])
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", proposed[i].Event.EventType(), err)
		}
		md := storedMetadata{Metadata: proposed[i].Metadata}
		if at, ok := p.erasedAt[class]; ok && at > i {
			// Erased in its own append: written erased, sealed nowhere.
			md.Redacted = proposed[at].ID
			out[i].Data = shadow
		} else {
			k, ok := keys[class]
			if !ok {
				k, err = s.currentKey(ctx, stream, class, current, tail)
				if err != nil {
					return nil, fmt.Errorf("key of %s %s: %w", stream, class, err)
				}
				keys[class] = k
			}
			out[i].Data, err = sealEvent(k, s.serverName(stream), out[i], data[i].Data)
			if err != nil {
				return nil, err
			}
			out[i].ContentType = esdb.ContentTypeBinary
			md.Sealed, md.Shadow = &sealedPart{Class: class, Key: k.rev}, shadow
		}
		b, err := meta(i, md)
		if err != nil {
			return nil, fmt.Errorf("%w: metadata: %v", events.ErrInvalidAppend, err)
		}
		out[i].Metadata = b
	}
	return out, nil
}

// additional binds a sealed event to its record: a ciphertext moved to
// another record does not open.
func additional(serverStream string, id uuid.UUID, eventType string) []byte {
	b := make([]byte, 0, len(serverStream)+len(eventType)+18)
	b = append(b, serverStream...)
	b = append(b, 0)
	b = append(b, id[:]...)
	b = append(b, 0)
	return append(b, eventType...)
}

// sealEvent returns nonce || AES-256-GCM(plain), bound to the record.
func sealEvent(k streamKey, serverStream string, rec esdb.EventData, plain []byte) ([]byte, error) {
	aead, err := newAEAD(k.key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, out); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return aead.Seal(out, out, plain, additional(serverStream, rec.EventID, rec.EventType)), nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		// The error names the key's length, never the key.
		return nil, fmt.Errorf("seal: %w", err)
	}
	return cipher.NewGCM(block)
}

// newKey is a fresh random key.
func newKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, k); err != nil {
		return nil, fmt.Errorf("new key: %w", err)
	}
	return k, nil
}

// shred appends a new key to the key stream of (stream, class) and
// truncates the stream before it: every older key is unreadable once it
// returns, and removed from the server's storage by the next scavenge.
// The new key records which erasure retired the old ones.
func (s *Store) shred(ctx context.Context, stream, class, erasureID string) (streamKey, error) {
	key, err := newKey()
	if err != nil {
		return streamKey{}, err
	}
	ks := s.keyStream(stream, class)
	// The erasures before this one, for the events they erased.
	prevK, prev, found, err := s.readKey(ctx, ks, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}})
	if err != nil {
		return streamKey{}, err
	}
	var earlier []retirement
	if found && prev.ErasedBy != "" {
		earlier = append(prev.Earlier, retirement{Key: prevK.rev, By: prev.ErasedBy})
		earlier = earlier[max(0, len(earlier)-maxEarlier):]
	}
	body, err := json.Marshal(keyRecord{Key: key, ErasedBy: erasureID, Earlier: earlier})
	if err != nil {
		return streamKey{}, err
	}
	var rev uint64
	ev := esdb.EventData{EventID: uuid.New(), EventType: keyEventType, ContentType: esdb.ContentTypeJson, Data: body}
	err = s.do(ctx, func(c *esdb.Client) error {
		wr, err := c.AppendToStream(ctx, ks, esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, ev)
		if err != nil {
			return err
		}
		rev = wr.NextExpectedVersion
		return nil
	})
	if err != nil {
		return streamKey{}, fmt.Errorf("append key: %w", err)
	}
	var md esdb.StreamMetadata
	md.SetTruncateBefore(rev)
	err = s.do(ctx, func(c *esdb.Client) error {
		_, err := c.SetStreamMetadata(ctx, ks, esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, md)
		return err
	})
	if err != nil {
		return streamKey{}, fmt.Errorf("truncate the older keys: %w", err)
	}
	s.shreds.Add(1)
	return streamKey{rev: rev, key: key}, nil
}

// currentKey is the newest key of (stream, class), made when there is
// none. A key remembered by this store is used while the stream's tail
// shows no erasure after the version it was remembered at.
func (s *Store) currentKey(ctx context.Context, stream, class string, current uint64, tail []stored) (streamKey, error) {
	if k, ok := s.remembered(stream, class, current, tail); ok {
		return k, nil
	}
	ks := s.keyStream(stream, class)
	// A new stream has no key yet, most likely: make one first, and read
	// only when another writer made it.
	fresh := current == 0
	for range 3 {
		if !fresh {
			k, _, found, err := s.readKey(ctx, ks, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}})
			if err != nil {
				return streamKey{}, err
			}
			if found {
				s.remember(stream, class, k, current)
				return k, nil
			}
		}
		fresh = false
		key, err := newKey()
		if err != nil {
			return streamKey{}, err
		}
		body, _ := json.Marshal(keyRecord{Key: key})
		ev := esdb.EventData{EventID: uuid.New(), EventType: keyEventType, ContentType: esdb.ContentTypeJson, Data: body}
		err = s.do(ctx, func(c *esdb.Client) error {
			_, err := c.AppendToStream(ctx, ks, esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev)
			return err
		})
		var e *esdb.Error
		if errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion {
			continue // another writer made it first: read theirs
		}
		if err != nil {
			return streamKey{}, fmt.Errorf("make key: %w", err)
		}
		k := streamKey{rev: 0, key: key}
		s.remember(stream, class, k, current)
		return k, nil
	}
	return streamKey{}, errors.New("make key: the key stream keeps changing")
}

// readKey reads one key of a key stream, and its record; found is false
// when the stream has none there (never made, or truncated past it:
// shredded).
func (s *Store) readKey(ctx context.Context, ks string, opts esdb.ReadStreamOptions) (k streamKey, rec keyRecord, found bool, err error) {
	err = s.do(ctx, func(c *esdb.Client) error {
		found = false
		rs, err := c.ReadStream(ctx, ks, opts, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		r := ev.OriginalEvent()
		if r == nil {
			return nil
		}
		rec = keyRecord{}
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return fmt.Errorf("key stream %s@%d does not decode", ks, r.EventNumber)
		}
		k, found = streamKey{rev: r.EventNumber, key: rec.Key}, true
		return nil
	})
	if notFound(err) {
		return streamKey{}, keyRecord{}, false, nil
	}
	if err != nil {
		return streamKey{}, keyRecord{}, false, fmt.Errorf("read key: %w", err)
	}
	if found && len(k.key) != 32 {
		return streamKey{}, keyRecord{}, false, fmt.Errorf("read key: key stream %s@%d holds no key", ks, k.rev)
	}
	return k, rec, found, nil
}

// rememberedKey is a (stream, class)'s current key as this store last
// saw it, with the stream's version then.
type rememberedKey struct {
	k       streamKey
	version uint64
}

// keyCacheLimit bounds the keys a store remembers.
const keyCacheLimit = 4096

type keyCache struct {
	mu sync.Mutex
	m  map[[2]string]rememberedKey
}

func (s *Store) remember(stream, class string, k streamKey, version uint64) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if s.keys.m == nil || len(s.keys.m) >= keyCacheLimit {
		s.keys.m = make(map[[2]string]rememberedKey)
	}
	s.keys.m[[2]string{stream, class}] = rememberedKey{k: k, version: version}
}

// erasureTypes are the types of the events that destroy keys.
var erasureTypes = map[string]bool{events.TypeTranscriptErased: true, events.TypeLaneErased: true,
	events.TypeTopicsErased: true, events.TypeErasureCompleted: true}

// remembered returns the remembered key of (stream, class) if the tail
// (the stream's newest events, newest first) covers every event since it
// was remembered and none of them is an erasure. Another node's erasure
// is always in the tail an append reads first, so a remembered key is
// never one an erasure destroyed.
func (s *Store) remembered(stream, class string, current uint64, tail []stored) (streamKey, bool) {
	s.keys.mu.Lock()
	r, ok := s.keys.m[[2]string{stream, class}]
	s.keys.mu.Unlock()
	if !ok || r.version > current {
		return streamKey{}, false
	}
	covered := current == r.version
	for _, e := range tail {
		if e.version <= r.version {
			covered = true
			break
		}
		if erasureTypes[e.typ] {
			return streamKey{}, false
		}
	}
	return r.k, covered
}

// keyring opens sealed records for one read or one subscription: each key
// is read from the server once, when first needed. A key destroyed after
// it was read is still used for the records of the same read: they all
// come before the erasure that destroyed it, which the reader meets next.
type keyring struct {
	s    *Store
	ctx  context.Context
	keys map[[2]string]keyState
}

type keyState struct {
	aead     cipher.AEAD // nil: shredded
	erasedBy string
}

func (s *Store) newKeyring(ctx context.Context) *keyring {
	return &keyring{s: s, ctx: ctx, keys: map[[2]string]keyState{}}
}

// open decodes a sealed record's event, or its shadow when the key is gone.
func (kr *keyring) open(serverStream string, r *esdb.RecordedEvent, sp *sealedPart, shadow []byte, name string) (events.Event, string, error) {
	data, erasedBy, err := kr.openData(serverStream, r, sp, shadow, name)
	if err != nil {
		return nil, "", err
	}
	e, err := events.Decode(r.EventType, data)
	return e, erasedBy, err
}

// openData returns a sealed record's data as it was written, or its shadow
// (and the erasure that destroyed the key) when the key is gone.
func (kr *keyring) openData(serverStream string, r *esdb.RecordedEvent, sp *sealedPart, shadow []byte, name string) ([]byte, string, error) {
	ks := kr.s.keyStream(name, sp.Class)
	id := [2]string{ks, fmt.Sprint(sp.Key)}
	st, ok := kr.keys[id]
	if !ok {
		if len(kr.keys) >= keyCacheLimit {
			clear(kr.keys)
		}
		k, later, found, err := kr.s.readKey(kr.ctx, ks, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(sp.Key)})
		if err != nil {
			return nil, "", err
		}
		switch {
		case found && k.rev == sp.Key:
			aead, err := newAEAD(k.key)
			if err != nil {
				return nil, "", err
			}
			st = keyState{aead: aead}
		case found:
			// Truncated before a later key: that key's erasure (or a
			// later one) destroyed this one.
			st = keyState{erasedBy: cmp.Or(later.destroyerOf(sp.Key), "erased")}
		default:
			st = keyState{erasedBy: "erased"}
		}
		kr.keys[id] = st
	}
	if st.aead == nil {
		return shadow, st.erasedBy, nil
	}
	n := st.aead.NonceSize()
	if len(r.Data) < n {
		return nil, "", fmt.Errorf("event %s@%d: sealed content too short", r.StreamID, r.EventNumber)
	}
	plain, err := st.aead.Open(nil, r.Data[:n], r.Data[n:], additional(serverStream, r.EventID, r.EventType))
	if err != nil {
		return nil, "", fmt.Errorf("event %s@%d: sealed content does not open", r.StreamID, r.EventNumber)
	}
	return plain, "", nil
}
