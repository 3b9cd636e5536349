package sessions_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
	"hermes/projections/sessions"
)

// BenchmarkApplyTouches measures what make bench's resolve over HTTP asks
// of the lanes read model: batches of 140 touches (20 ms of resolves at
// 7,000 a second) on lanes picked at random among 100,000. One op is one
// batch; cpu-µs/touch is the process's CPU time over the touches applied.
func BenchmarkApplyTouches(b *testing.B) {
	const lanes, perBatch = 100_000, 140
	ctx := context.Background()
	p, err := sessions.Open(filepath.Join(b.TempDir(), "lanes.db"), sessions.Exports{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	streams, versions, pos := resolveLanes(b, p, 1_000_000, lanes)
	var batch []events.Envelope
	rng := rand.New(rand.NewPCG(1, 2))
	at := t0
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		batch = batch[:0]
		for range perBatch {
			i := rng.IntN(lanes)
			at = at.Add(time.Millisecond)
			pos++
			versions[i]++
			e := events.Touched{At: at}
			batch = append(batch, events.Envelope{Stream: streams[i], Version: versions[i], Position: pos, Event: e, Type: e.EventType()})
		}
		if err := p.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*perBatch), "cpu-µs/touch")
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExportSessionsJSON measures one rewrite of sessions.json at
// 100,000 lanes (the exporter's cost under make bench's resolve load).
// cpu-ms/export is the process's CPU time per rewrite.
func BenchmarkExportSessionsJSON(b *testing.B) {
	const lanes = 100_000
	ctx := context.Background()
	dir := b.TempDir()
	p, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{SessionsJSON: filepath.Join(dir, "sessions.json"), MinInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	resolveLanes(b, p, 1_000_000, lanes)
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/export")
}

// resolveLanes applies to p the resolve of n new lanes, telegram DMs from
// chat first on, in batches of about 1,000 events, and returns their
// streams, their versions and the last position.
func resolveLanes(tb testing.TB, p *sessions.Projection, first, n int) (streams []string, versions []uint64, pos uint64) {
	tb.Helper()
	streams, versions = make([]string, n), make([]uint64, n)
	var batch []events.Envelope
	for i := range n {
		chat := fmt.Sprint(first + i)
		key := "agent:main:telegram:dm:" + chat
		streams[i] = events.LaneStream(key)
		decided, err := domain.Lane{}.Resolve(domain.ResolveRequest{Source: src(chat), SessionKey: key, Entropy: fmt.Sprintf("%08x", i)}, t0)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range decided {
			pos++
			versions[i]++
			batch = append(batch, events.Envelope{Stream: streams[i], Version: versions[i], Position: pos, Event: e, Type: e.EventType()})
		}
		if len(batch) >= 1000 || i == n-1 {
			if err := p.Apply(context.Background(), batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return streams, versions, pos
}
