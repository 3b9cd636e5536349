package kurrentdb_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
)

// messageRecord is a record of a message holding text, as another store
// (the embedded one) keeps it; its metadata is not as encoding/json would
// write it, so a test sees that the bytes are kept.
func messageRecord(t *testing.T, stream string, v uint64, text string) events.Record {
	t.Helper()
	data, err := events.Encode(said("s", text))
	if err != nil {
		t.Fatal(err)
	}
	return events.Record{Stream: stream, Version: v, ID: uuid.NewString(), Type: events.TypeMessageAppended, Data: data,
		Metadata:   []byte(fmt.Sprintf(`{"schema_version":1, "command":"copied %d" }`, v)),
		RecordedAt: time.Date(2025, 7, 1, 12, 0, 0, 123456789, time.UTC).Add(time.Duration(v) * time.Hour)}
}

func erasureRecord(t *testing.T, stream string, v uint64) events.Record {
	t.Helper()
	data, err := events.Encode(events.TranscriptErased{SessionID: "s", Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	return events.Record{Stream: stream, Version: v, ID: uuid.NewString(), Type: events.TypeTranscriptErased, Data: data,
		Metadata: []byte(`{"schema_version":1}`), RecordedAt: t0.Add(time.Duration(v) * time.Second)}
}

// TestWriteRecordsSealsAndErases: records holding personal content are
// written sealed (the words in none of the server's files), read back as
// they were written (data, metadata byte for byte, time); an erasure among
// later records destroys their key, after which they read as the embedded
// store's rewrite leaves them, and a purge removes the key from the
// storage; an erasure in the same write as the records it erases leaves
// them erased; a record at a wrong version destroys no key.
func TestWriteRecordsSealsAndErases(t *testing.T) {
	srv := startEmulator(t)
	s := open(t, srv.URL())
	ctx := t.Context()
	st := events.TranscriptStream("s")
	words := "words-" + uuid.NewString()[:8]
	want := []events.Record{messageRecord(t, st, 1, words), messageRecord(t, st, 2, words)}
	if err := s.WriteRecords(ctx, want); err != nil {
		t.Fatalf("WriteRecords() error = %v", err)
	}
	if bytes.Contains(srv.Storage(), []byte(words)) {
		t.Fatal("the server's storage holds the words of the records in plaintext")
	}
	key := keyOf(t, srv, st, events.ClassMessages)
	if !bytes.Contains(srv.Storage(), []byte(key)) {
		t.Fatal("control: the messages key is not in the server's storage")
	}
	got, err := s.ReadRecords(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(events.Record{}, "Position")); diff != "" {
		t.Fatalf("ReadRecords() (-written +read):\n%s", diff)
	}

	// A wrong version writes nothing and destroys no key.
	late := erasureRecord(t, st, 5)
	if err := s.WriteRecords(ctx, []events.Record{late}); !errors.Is(err, events.ErrWrongExpectedVersion) {
		t.Fatalf("WriteRecords(erasure at a wrong version) error = %v, want ErrWrongExpectedVersion", err)
	}
	if k := keyOf(t, srv, st, events.ClassMessages); k != key {
		t.Fatal("an erasure at a wrong version destroyed the key")
	}

	x := erasureRecord(t, st, 3)
	if err := s.WriteRecords(ctx, []events.Record{x}); err != nil {
		t.Fatalf("WriteRecords(erasure) error = %v", err)
	}
	got, err = s.ReadRecords(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("ReadRecords() = %d records, want 3", len(got))
	}
	for _, r := range got[:2] {
		var md events.Metadata
		if err := json.Unmarshal(r.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		// What the embedded store's rewrite makes of it.
		orig, err := events.Decode(r.Type, want[r.Version-1].Data)
		if err != nil {
			t.Fatal(err)
		}
		erased, _ := events.TranscriptErased{Scope: events.EraseTranscript}.Erase(orig)
		wantData, _ := events.Encode(erased)
		if bytes.Contains(r.Data, []byte(words)) || md.Redacted != x.ID || !bytes.Equal(r.Data, wantData) {
			t.Errorf("after the erasure, record %s@%d = %s %s; want it erased by %s", r.Stream, r.Version, r.Data, r.Metadata, x.ID)
		}
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(srv.Storage(), []byte(key)) {
		t.Error("after the erasure and a purge, the server's storage holds the destroyed key")
	}

	// Records and their erasure in one write: written erased.
	st2 := events.TranscriptStream("s2")
	run := []events.Record{messageRecord(t, st2, 1, words), erasureRecord(t, st2, 2)}
	if err := s.WriteRecords(ctx, run); err != nil {
		t.Fatalf("WriteRecords(a message and its erasure) error = %v", err)
	}
	envs, err := s.ReadStream(ctx, st2, 1, 10, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(envs[0].Event); len(envs) != 2 || bytes.Contains(b, []byte(words)) || envs[0].Metadata.Redacted != run[1].ID {
		t.Errorf("a message written with its erasure reads %s (redacted %q); want it erased by %s", b, envs[0].Metadata.Redacted, run[1].ID)
	}
	if bytes.Contains(srv.Storage(), []byte(words)) {
		t.Error("the server's storage holds the words of a message written with its erasure")
	}
}

// TestErasedEventsNameTheFirstErasure: an event erased by a clear and then
// by a delete names the clear (the first erasure that changed it), as the
// embedded store's rewrite does; one written between them names the
// delete. Records and envelopes alike, so a copy verifies.
func TestErasedEventsNameTheFirstErasure(t *testing.T) {
	srv := startEmulator(t)
	s := open(t, srv.URL())
	ctx := t.Context()
	st := events.TranscriptStream("s")
	clearing := erasureRecord(t, st, 2)
	clearing.Data, _ = events.Encode(events.TranscriptErased{SessionID: "s", Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: t0})
	del := erasureRecord(t, st, 4)
	for _, recs := range [][]events.Record{{messageRecord(t, st, 1, "before")}, {clearing}, {messageRecord(t, st, 3, "between")}, {del}} {
		if err := s.WriteRecords(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.ReadRecords(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := s.ReadStream(ctx, st, 1, 10, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || len(envs) != 4 {
		t.Fatalf("read %d records, %d events; want 4", len(recs), len(envs))
	}
	for i, want := range map[int]string{0: clearing.ID, 2: del.ID} {
		var md events.Metadata
		if err := json.Unmarshal(recs[i].Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if md.Redacted != want || envs[i].Metadata.Redacted != want {
			t.Errorf("event %d reads as erased by %q (record), %q (event); want %s", i+1, md.Redacted, envs[i].Metadata.Redacted, want)
		}
	}
}
