package kurrentdb_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"hermes/events"

	"github.com/google/uuid"
)

// BenchmarkAppendOnEmulator measures one-event appends with an exact
// expected version over loopback gRPC to the emulator (not a real
// KurrentDB): sequential (latency) and 16 parallel writers on their own
// streams (throughput).
func BenchmarkAppendOnEmulator(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "sequential"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, startEmulator(b).URL())
			var writer atomic.Int64
			b.ResetTimer()
			if !parallel {
				st := events.LaneStream("bench")
				for i := range b.N {
					if _, err := s.Append(b.Context(), st, events.ExactVersion(uint64(i)), touched(st, fmt.Sprint(i))); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(8) // 8 × GOMAXPROCS writers
			b.RunParallel(func(pb *testing.PB) {
				st := events.LaneStream(fmt.Sprint("bench-", writer.Add(1)))
				var v uint64
				for pb.Next() {
					if _, err := s.Append(b.Context(), st, events.ExactVersion(v), touched(st, fmt.Sprint(v))); err != nil {
						b.Error(err)
						return
					}
					v++
				}
			})
		})
	}
}

// BenchmarkAppendMessageOnEmulator measures sequential one-message appends
// (1 KiB of text, an exact expected version) to one transcript over
// loopback gRPC to the emulator (not a real KurrentDB): the message is
// personal content, so it is sealed (seal.go) under the transcript's key.
func BenchmarkAppendMessageOnEmulator(b *testing.B) {
	s := open(b, startEmulator(b).URL())
	st := events.TranscriptStream("bench")
	text := strings.Repeat("hello world ", 86)[:1024]
	b.ResetTimer()
	for i := range b.N {
		p := []events.Proposed{{ID: uuid.NewString(), Event: said("bench", text), Metadata: events.Metadata{SchemaVersion: 1, Command: "append_message"}}}
		if _, err := s.Append(b.Context(), st, events.ExactVersion(uint64(i)), p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadTranscriptOnEmulator measures reading a transcript of 50
// messages of 1 KiB whole over loopback gRPC to the emulator (not a real
// KurrentDB), as a load does: sealed, each read also reads the
// transcript's key once.
func BenchmarkReadTranscriptOnEmulator(b *testing.B) {
	s := open(b, startEmulator(b).URL())
	st := events.TranscriptStream("bench")
	text := strings.Repeat("hello world ", 86)[:1024]
	for i := range 50 {
		p := []events.Proposed{{ID: uuid.NewString(), Event: said("bench", text), Metadata: events.Metadata{SchemaVersion: 1, Command: "append_message"}}}
		if _, err := s.Append(b.Context(), st, events.ExactVersion(uint64(i)), p); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		envs, err := s.ReadStream(b.Context(), st, 1, 100, events.Forwards)
		if err != nil || len(envs) != 50 {
			b.Fatalf("ReadStream = %d events, %v", len(envs), err)
		}
	}
}
