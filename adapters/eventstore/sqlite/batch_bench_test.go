package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"hermes/events"
)

// BenchmarkAppendBatch measures one AppendBatch of a restart sweep: one
// small event (a resume mark with a sweep's metadata) on each of 10,000
// streams that already hold two events, with the random UUID event ids the
// commands derive, committed in one transaction and one fsync. It reports
// the process CPU per batch (cpu-ms/op) besides the wall time.
func BenchmarkAppendBatch(b *testing.B) {
	const streams = 10_000
	var cpu time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		// Seeded by the same store, as a server's lanes are by its own
		// writer: its page and version caches are warm.
		s, err := Open(filepath.Join(b.TempDir(), fmt.Sprintf("events-%d.db", i)))
		if err != nil {
			b.Fatal(err)
		}
		seeded := make([]events.StreamAppend, streams)
		for k := range seeded {
			seeded[k] = events.StreamAppend{Stream: benchLane(k), Expected: events.NoStream(),
				Proposed: []events.Proposed{sweepProposal(), sweepProposal()}}
		}
		if _, err := s.AppendBatch(context.Background(), slices.Values(seeded)); err != nil {
			b.Fatal(err)
		}
		appends := make([]events.StreamAppend, streams)
		for k := range appends {
			appends[k] = events.StreamAppend{Stream: benchLane(k), Expected: events.ExactVersion(2),
				Proposed: []events.Proposed{sweepProposal()}}
		}
		before := benchCPU()
		b.StartTimer()
		out, err := s.AppendBatch(context.Background(), slices.Values(appends))
		b.StopTimer()
		cpu += benchCPU() - before
		if err != nil {
			b.Fatal(err)
		}
		for k, r := range out {
			if r.Err != nil || r.Result.LastVersion() != 3 {
				b.Fatalf("append %d = %+v, want version 3", k, r)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func benchLane(i int) string { return fmt.Sprintf("agent:main:telegram:dm:%09d", i) }

func sweepProposal() events.Proposed {
	return events.Proposed{ID: uuid.NewString(), Event: events.ResumeMarked{Reason: events.ResumeRestartInterrupted, At: t0},
		Metadata: events.Metadata{Command: "suspend_recently_active", CommandID: uuid.NewString()}}
}

// benchCPU is the user and system CPU time of this process so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
