package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

// ErrNotACopy: the target of a copy holds events, and they are not the
// first events of the source (an earlier copy of it). Nothing was written.
var ErrNotACopy = errors.New("the target is not empty and is not an earlier copy of the source")

// Defaults of a copy.
const (
	defaultCopyBatch = 2000
	// maxCopyBatchBytes bounds the data and metadata of one write: one
	// transaction of the target, and the memory the copy holds.
	maxCopyBatchBytes = 8 << 20
)

// CopyOptions tune CopyLog.
type CopyOptions struct {
	// Batch is how many events one write (one transaction of the target)
	// carries; 0 is 2000.
	Batch int
	// Progress, when set, is told how far each phase is: "check" (the
	// target's events compared with the source's), "copy" and "verify",
	// done of total source positions.
	Progress func(phase string, done, total uint64)
}

// CopyReport says what a copy did.
type CopyReport struct {
	// Already is how many events the target held before, each equal to
	// the source's event at the same place; Copied how many were written.
	Already, Copied int
	// ErasedSince counts the target's events the source erased after the
	// earlier copy: the copy brought the erasures, which rewrote them.
	ErasedSince int
	// Verified is the verification: events and streams on each side, all
	// equal when CopyLog returns nil.
	Verified CopyVerification
	// Check, Copy, Purge and Verify are the times of the phases.
	Check, Copy, Purge, Verify time.Duration
}

// CopyVerification is the count of events and the digest of every stream
// on both sides of a copy.
type CopyVerification struct {
	Events, Streams int
	// Order is the digest of the global order: (stream, version, id) of
	// every event, in position order.
	Order [sha256.Size]byte
}

// CopyLog copies every event of src that dst lacks into dst, each with its
// id, stream, version, type, data, metadata and recorded time, in the
// source's global order (events.RecordStore), and verifies the result.
//
// dst must be empty or an earlier copy of src: its events, in order, equal
// to the first events of src (an event the source erased since may differ
// by that erasure alone; the erasure, copied after it, rewrites it on the
// target). Anything else is ErrNotACopy, before anything is written. A
// copy is resumable and idempotent: each write is one transaction of the
// target, a second run copies nothing, a run stopped half way (even by
// SIGKILL) leaves a prefix that the next run completes.
//
// It ends with a verification that reads both sides again: the count of
// events, a digest of each stream (every field of every event) and of the
// global order, up to the last event copied; any difference is an error
// naming the streams. Snapshots are not copied: they are a cache of the
// log, and the target folds its own. When an erasure was copied onto a
// store that erases in place (events.Eraser), the target is purged before
// the verification, so the old versions of the rewritten events are in
// none of its files.
func CopyLog(ctx context.Context, src, dst events.Store, o CopyOptions) (CopyReport, error) {
	from, ok := src.(events.RecordStore)
	if !ok {
		return CopyReport{}, errors.New("copy: the source store cannot read events as stored")
	}
	to, ok := dst.(events.RecordStore)
	if !ok {
		return CopyReport{}, errors.New("copy: the target store cannot write events as stored")
	}
	if o.Batch <= 0 {
		o.Batch = defaultCopyBatch
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	head, err := src.Head(ctx)
	if err != nil {
		return CopyReport{}, fmt.Errorf("copy: source: %w", err)
	}
	var rep CopyReport
	began := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, began = now.Sub(began), now
	}

	// The target's events must be the source's first ones.
	var srcAt, dstAt uint64
	for {
		have, err := to.ReadRecords(ctx, dstAt, o.Batch)
		if err != nil {
			return rep, fmt.Errorf("copy: read the target: %w", err)
		}
		if len(have) == 0 {
			break
		}
		want, err := from.ReadRecords(ctx, srcAt, len(have))
		if err != nil {
			return rep, fmt.Errorf("copy: read the source: %w", err)
		}
		for i, t := range have {
			if i >= len(want) {
				return rep, fmt.Errorf("%w: it holds %s@%d (%s) and more after the source's %d events", ErrNotACopy, t.Stream, t.Version, t.ID, rep.Already)
			}
			switch s := want[i]; {
			case sameRecord(s, t):
			case erasedSince(s, t):
				rep.ErasedSince++
			default:
				return rep, fmt.Errorf("%w: its event %d is %s@%d (%s), the source's is %s@%d (%s)%s",
					ErrNotACopy, rep.Already+1, t.Stream, t.Version, t.ID, s.Stream, s.Version, s.ID, differsIn(s, t))
			}
			rep.Already++
		}
		srcAt, dstAt = want[len(have)-1].Position, have[len(have)-1].Position
		progress("check", srcAt, head)
	}

	lap(&rep.Check)

	// The rest, in order, one transaction per batch; the next batch is
	// read from the source while the target writes this one.
	type batch struct {
		recs []events.Record
		err  error
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := make(chan batch, 1)
	go func() {
		defer close(batches)
		at := srcAt
		for {
			recs, err := from.ReadRecords(readCtx, at, o.Batch)
			if err != nil || len(recs) == 0 {
				if err != nil {
					select {
					case batches <- batch{err: err}:
					case <-readCtx.Done():
					}
				}
				return
			}
			select {
			case batches <- batch{recs: recs}:
			case <-readCtx.Done():
				return
			}
			at = recs[len(recs)-1].Position
		}
	}()
	erasures := false
	for b := range batches {
		if b.err != nil {
			return rep, fmt.Errorf("copy: read the source: %w", b.err)
		}
		recs := b.recs
		for len(recs) > 0 {
			n, size := 0, 0
			for n < len(recs) && (n == 0 || size+len(recs[n].Data)+len(recs[n].Metadata) <= maxCopyBatchBytes) {
				size += len(recs[n].Data) + len(recs[n].Metadata)
				erasures = erasures || events.IsErasureType(recs[n].Type)
				n++
			}
			if err := to.WriteRecords(ctx, recs[:n]); err != nil {
				return rep, fmt.Errorf("copy: write %s@%d and after to the target: %w", recs[0].Stream, recs[0].Version, err)
			}
			rep.Copied += n
			srcAt = recs[n-1].Position
			recs = recs[n:]
			progress("copy", srcAt, max(head, srcAt))
		}
	}
	lap(&rep.Copy)
	if x, ok := dst.(events.Eraser); ok && (erasures || rep.ErasedSince > 0) {
		if err := x.Purge(ctx); err != nil {
			return rep, fmt.Errorf("copy: purge the target after the erasures copied: %w", err)
		}
	}

	lap(&rep.Purge)
	// Both sides at once: each is mostly waiting for its store.
	var dstSum logDigest
	dstDone := make(chan error, 1)
	go func() {
		var err error
		dstSum, err = digestLog(ctx, to, 0, nil)
		dstDone <- err
	}()
	srcSum, srcErr := digestLog(ctx, from, srcAt, func(done uint64) { progress("verify", done, max(srcAt, 1)) })
	dstErr := <-dstDone
	if srcErr != nil {
		return rep, fmt.Errorf("copy: verify: read the source: %w", srcErr)
	}
	if dstErr != nil {
		return rep, fmt.Errorf("copy: verify: read the target: %w", dstErr)
	}
	if diff := srcSum.diff(dstSum); diff != "" {
		return rep, fmt.Errorf("copy: verification failed: %s", diff)
	}
	lap(&rep.Verify)
	rep.Verified = CopyVerification{Events: srcSum.events, Streams: len(srcSum.streams), Order: srcSum.order}
	return rep, nil
}

// sameRecord reports whether two records are the same event (positions
// aside: each store draws its own).
func sameRecord(a, b events.Record) bool {
	return a.Stream == b.Stream && a.Version == b.Version && a.ID == b.ID && a.Type == b.Type &&
		a.RecordedAt.Equal(b.RecordedAt) && bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Metadata, b.Metadata)
}

// erasedSince reports whether the source's record s is the target's t
// erased after t was copied: the same event, s redacted and t not.
func erasedSince(s, t events.Record) bool {
	if s.Stream != t.Stream || s.Version != t.Version || s.ID != t.ID || s.Type != t.Type || !s.RecordedAt.Equal(t.RecordedAt) {
		return false
	}
	sm, err := events.DecodeMetadata(s.Metadata)
	if err != nil {
		return false
	}
	tm, err := events.DecodeMetadata(t.Metadata)
	return err == nil && sm.Redacted != "" && tm.Redacted == ""
}

// differsIn names what differs between two records of the same place.
func differsIn(s, t events.Record) string {
	if s.Stream != t.Stream || s.Version != t.Version || s.ID != t.ID {
		return ""
	}
	var what []string
	if s.Type != t.Type {
		what = append(what, "type")
	}
	if !bytes.Equal(s.Data, t.Data) {
		what = append(what, "data")
	}
	if !bytes.Equal(s.Metadata, t.Metadata) {
		what = append(what, "metadata")
	}
	if !s.RecordedAt.Equal(t.RecordedAt) {
		what = append(what, "time")
	}
	return ", which differ in " + strings.Join(what, ", ")
}

// logDigest is what a verification compares.
type logDigest struct {
	events  int
	streams map[string]*streamDigest
	order   [sha256.Size]byte
}

type streamDigest struct {
	events int
	h      hash.Hash
	sum    []byte
}

// digestLog reads the records of s up to position upTo (0: all) and
// digests them.
func digestLog(ctx context.Context, s events.RecordStore, upTo uint64, progress func(uint64)) (logDigest, error) {
	d := logDigest{streams: map[string]*streamDigest{}}
	order := sha256.New()
	var at uint64
	var n [8]byte
	field := func(h hash.Hash, b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for {
		recs, err := s.ReadRecords(ctx, at, defaultCopyBatch)
		if err != nil {
			return d, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if upTo > 0 && r.Position > upTo {
				return d.finish(order), nil
			}
			sd := d.streams[r.Stream]
			if sd == nil {
				sd = &streamDigest{h: sha256.New()}
				d.streams[r.Stream] = sd
			}
			sd.events++
			d.events++
			binary.BigEndian.PutUint64(n[:], r.Version)
			sd.h.Write(n[:])
			field(sd.h, []byte(r.ID))
			field(sd.h, []byte(r.Type))
			field(sd.h, r.Data)
			field(sd.h, r.Metadata)
			binary.BigEndian.PutUint64(n[:], uint64(r.RecordedAt.UnixNano()))
			sd.h.Write(n[:])
			field(order, []byte(r.Stream))
			binary.BigEndian.PutUint64(n[:], r.Version)
			order.Write(n[:])
			field(order, []byte(r.ID))
			at = r.Position
		}
		if progress != nil {
			progress(at)
		}
		if upTo > 0 && at >= upTo {
			break
		}
	}
	return d.finish(order), nil
}

func (d logDigest) finish(order hash.Hash) logDigest {
	copy(d.order[:], order.Sum(nil))
	for _, sd := range d.streams {
		sd.sum, sd.h = sd.h.Sum(nil), nil
	}
	return d
}

// diff describes how two digests differ ("" when equal).
func (d logDigest) diff(o logDigest) string {
	var streams []string
	for name, sd := range d.streams {
		if od := o.streams[name]; od == nil || od.events != sd.events || !bytes.Equal(od.sum, sd.sum) {
			streams = append(streams, name)
		}
	}
	for name := range o.streams {
		if d.streams[name] == nil {
			streams = append(streams, name)
		}
	}
	slices.Sort(streams)
	switch {
	case len(streams) > 0:
		shown := streams[:min(len(streams), 5)]
		more := ""
		if len(streams) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(streams)-len(shown))
		}
		return fmt.Sprintf("the source has %d events in %d streams, the target %d in %d; streams that differ: %s%s",
			d.events, len(d.streams), o.events, len(o.streams), strings.Join(shown, ", "), more)
	case d.events != o.events:
		return fmt.Sprintf("the source has %d events, the target %d", d.events, o.events)
	case d.order != o.order:
		return "every stream is equal, but the global order differs"
	}
	return ""
}

// CopyEnd is one side of a copy: a store URL (postgres://, esdb://, …),
// or an embedded store given by its home directory or its events.db file.
type CopyEnd struct {
	Spec StoreSpec
	// Path is the SQLite file of an embedded store; Home its home, when
	// given as one (the copy then holds its gateway lock).
	Path string
	Home *Home
}

// ParseCopyEnd reads a --from or --to of hermes store copy: a URL with a
// scheme (postgres://, postgresql://, esdb://, kurrentdb://, …; sqlite://
// or file: name an events.db file), an existing directory (a hermes home),
// or a path ending in .db (an events.db file). A target that does not
// exist yet and does not end in .db is a home to create.
func ParseCopyEnd(arg string) (CopyEnd, error) {
	if arg == "" {
		return CopyEnd{}, errors.New("no store given")
	}
	if scheme, rest, ok := strings.Cut(arg, "://"); ok && scheme != "" {
		switch strings.ToLower(scheme) {
		case "sqlite", "file":
			return dbFile(rest), nil
		}
		return CopyEnd{Spec: StoreSpec{URL: arg}}, nil
	}
	if rest, ok := strings.CutPrefix(arg, "file:"); ok {
		return dbFile(rest), nil
	}
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return CopyEnd{Home: &Home{Dir: arg}, Path: Home{Dir: arg}.EventsDB()}, nil
	}
	if strings.HasSuffix(arg, ".db") {
		return dbFile(arg), nil
	}
	if _, err := os.Stat(arg); err == nil {
		return CopyEnd{}, fmt.Errorf("%s is neither a hermes home (a directory) nor an events.db file", arg)
	}
	return CopyEnd{Home: &Home{Dir: arg}, Path: Home{Dir: arg}.EventsDB()}, nil
}

// dbFile is the end of an events.db file; the file of a home
// (<home>/hermes/events.db) is that home, so that a copy into it holds the
// home's lock as hermes serve does.
func dbFile(path string) CopyEnd {
	if filepath.Base(path) == "events.db" && filepath.Base(filepath.Dir(path)) == "hermes" {
		h := Home{Dir: filepath.Dir(filepath.Dir(path))}
		if h.EventsDB() == filepath.Clean(path) {
			return CopyEnd{Path: path, Home: &h}
		}
	}
	return CopyEnd{Path: path}
}

// String names the end for messages, without a password.
func (e CopyEnd) String() string {
	if e.Path != "" {
		return e.Path
	}
	return e.Spec.String()
}

// OpenCopySource opens the source of a copy read-only.
func OpenCopySource(ctx context.Context, e CopyEnd) (events.Store, error) {
	if e.Path == "" {
		if e.Spec.Postgres() {
			return OpenStoreReadOnly(ctx, e.Spec, Home{})
		}
		return openKurrentDB(ctx, e.Spec, nil)
	}
	if _, err := os.Stat(e.Path); err != nil {
		return nil, fmt.Errorf("no hermes event log at %s: %w", e.Path, err)
	}
	return sqlite.Open(e.Path, sqlite.WithReadOnly())
}

// OpenCopyTarget opens the target of a copy for writing; an embedded one
// is created when missing (its home too), under the home's gateway lock
// when it is given by its home. release lets go of what it holds.
func OpenCopyTarget(ctx context.Context, e CopyEnd) (s events.Store, release func(), err error) {
	if e.Path == "" {
		if e.Spec.Postgres() {
			s, err = openPostgres(ctx, e.Spec)
		} else {
			s, err = openKurrentDB(ctx, e.Spec, nil)
		}
		return s, func() {}, err
	}
	release = func() {}
	if e.Home != nil {
		if err := e.Home.Ensure(); err != nil {
			return nil, nil, err
		}
		lock, err := e.Home.Lock()
		if err != nil {
			return nil, nil, fmt.Errorf("the target home %s is in use: %w", e.Home.Dir, err)
		}
		release = lock.Release
	} else if err := os.MkdirAll(filepath.Dir(e.Path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", filepath.Dir(e.Path), err)
	}
	st, err := sqlite.Open(e.Path)
	if err != nil {
		release()
		return nil, nil, err
	}
	return st, release, nil
}
