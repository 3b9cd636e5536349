package transcripts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/events"
	"hermes/projections"
)

// corpus generates a deterministic, searchable history: English-like text
// with Zipf-distributed words, one message in ten in Chinese.
type corpus struct {
	rng      *rand.Rand
	zipf     *rand.Zipf
	words    []string
	cjkWords []string
	h        *history
	now      time.Time
	lanes    []string
	current  map[string]string // lane → session id
	sessions int
}

const benchVocabulary = 8000

func newCorpus(seed uint64, lanes int) *corpus {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := &corpus{
		rng:     rng,
		zipf:    rand.NewZipf(rng, 1.1, 2, benchVocabulary-1),
		h:       newHistory(),
		now:     t0,
		current: map[string]string{},
	}
	syllables := []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "so", "du", "ga", "hi", "ju", "be", "ra"}
	for i := range benchVocabulary {
		var b strings.Builder
		for n := i; ; n /= len(syllables) {
			b.WriteString(syllables[n%len(syllables)])
			if n < len(syllables) {
				break
			}
		}
		c.words = append(c.words, b.String()+"x")
	}
	cjk := []rune("记忆断裂问题任务完成部署服务器数据库网络配置日志错误重启用户消息会话搜索索引测试版本更新文件系统容器镜像")
	for i := range 400 {
		n := 2 + i%4
		var b strings.Builder
		for j := range n {
			b.WriteRune(cjk[(i*7+j*13+j*j)%len(cjk)])
		}
		c.cjkWords = append(c.cjkWords, b.String())
	}
	for i := range lanes {
		c.lanes = append(c.lanes, fmt.Sprintf("agent:main:telegram:dm:%d", i))
	}
	return c
}

func (c *corpus) word() string { return c.words[c.zipf.Uint64()] }

// text returns about 200 characters.
func (c *corpus) text() string {
	var b strings.Builder
	if c.rng.IntN(10) == 0 {
		for b.Len() < 200 { // 3 bytes a character: about 70 characters
			b.WriteString(c.cjkWords[c.rng.IntN(len(c.cjkWords))])
			if c.rng.IntN(3) == 0 {
				b.WriteString("，")
			}
		}
		return b.String()
	}
	for b.Len() < 200 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.word())
	}
	return b.String()
}

// next appends one event: about 30% lane events (mostly the ones the
// transcripts projection ignores, sometimes a new session), 70% messages.
func (c *corpus) next() {
	c.now = c.now.Add(time.Duration(c.rng.IntN(2000)) * time.Millisecond)
	key := c.lanes[c.rng.IntN(len(c.lanes))]
	sid, ok := c.current[key]
	if !ok || c.rng.IntN(1000) == 0 {
		c.newSession(key)
		return
	}
	switch r := c.rng.IntN(100); {
	case r < 10:
		c.h.lane(key, events.Touched{At: c.now})
	case r < 20:
		c.h.lane(key, events.TurnStarted{TurnID: "t", SessionID: sid, At: c.now})
	case r < 30:
		c.h.lane(key, events.TurnCompleted{TurnID: "t", SessionID: sid, InputTokens: 10, At: c.now})
	default:
		role := "user"
		if r%2 == 0 {
			role = "assistant"
		}
		c.h.tr(sid, appended(sid, text(role, c.text()), c.now))
	}
}

// newSession starts the next session of the lane key: its first, or an
// idle reset of the one it has.
func (c *corpus) newSession(key string) {
	c.sessions++
	prev := c.current[key]
	sid := fmt.Sprintf("20260301_000000_%08x", c.sessions)
	c.current[key] = sid
	if prev == "" {
		c.h.lane(key, created(key, sid, c.now))
		return
	}
	c.h.lane(key, events.SessionAutoReset{SessionKey: key, SessionID: sid, PreviousSessionID: prev,
		Reason: events.AutoResetIdle, Origin: src("telegram", "u"), Platform: "telegram", At: c.now})
}

// longMessages appends n messages to a session of their own (on a lane
// the generator does not use) whose position lists of the words 0 and 1
// run over FTS5's leaf pages, in doclists of several pages. Of every
// three, one holds both words, one only word 1 and one only word 0, and
// the last two only word 0 then only word 1: the cursors of a phrase of
// the two skip over long lists, and word 0's ends first. A small corpus takes the paths of the
// index readers that a large one takes by its size.
func (c *corpus) longMessages(n int) []events.Envelope {
	from := len(c.h.all)
	key := fmt.Sprintf("agent:main:telegram:dm:long%d", from)
	sid := fmt.Sprintf("20260301_000000_long%d", from)
	c.h.lane(key, created(key, sid, c.now))
	for i := range n {
		words := []string{c.words[0], c.words[1]}
		switch {
		case i == n-1 || i != n-2 && i%3 == 1:
			words = words[1:]
		case i == n-2 || i%3 == 2:
			words = words[:1]
		}
		body := strings.Repeat(strings.Join(words, " ")+" ", 300+17*i)
		c.h.tr(sid, appended(sid, text("user", body), c.now))
	}
	return c.h.all[from:]
}

func (c *corpus) events(n int) []events.Envelope {
	from := len(c.h.all)
	for len(c.h.all) < from+n {
		c.next()
	}
	return c.h.all[from : from+n]
}

func applyAll(b *testing.B, p *Projection, envs []events.Envelope) {
	b.Helper()
	for i := 0; i < len(envs); i += projections.MaxBatch {
		if err := p.Apply(context.Background(), envs[i:min(i+projections.MaxBatch, len(envs))]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply measures catch-up throughput: b.N events (30% lane, 70%
// messages of about 200 characters, both FTS indexes maintained) applied in
// runner-sized batches to a fresh file.
func BenchmarkApply(b *testing.B) {
	envs := newCorpus(1, 50).events(b.N)
	p := openTemp(b)
	b.ResetTimer()
	start := time.Now()
	applyAll(b, p, envs)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// benchMessages is the search corpus size: HERMES_BENCH_MESSAGES, default
// 20,000 (make bench sets 1,000,000).
func benchMessages(b *testing.B) int {
	if v := os.Getenv("HERMES_BENCH_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("HERMES_BENCH_MESSAGES=%q: want a positive number", v)
		}
		return n
	}
	return 20000
}

// BenchmarkSearch measures search latency over a corpus of
// HERMES_BENCH_MESSAGES messages, per kind of query, and reports p50 and
// p95 in milliseconds.
func BenchmarkSearch(b *testing.B) {
	n := benchMessages(b)
	c := newCorpus(2, 200)
	// HERMES_BENCH_DIR keeps the corpus file between runs (it takes a
	// while to build a large one); by default it is built in a temporary
	// directory and removed.
	dir := os.Getenv("HERMES_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("search-corpus-%d.db", n))
	_, statErr := os.Stat(path)
	p := openAt(b, path)
	built := time.Now()
	messages := 0
	if statErr != nil {
		// A new corpus is built as a rebuild builds it (bulk.go).
		if err := p.BeginBulk(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	for messages < n {
		batch := c.events(projections.MaxBatch)
		for _, e := range batch {
			if _, ok := e.Event.(events.MessageAppended); ok {
				messages++
			}
		}
		if statErr != nil {
			applyAll(b, p, batch)
		}
	}
	if statErr != nil {
		if err := p.EndBulk(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Logf("corpus: %d messages, %d events, built in %s", messages, len(c.h.all), time.Since(built).Round(time.Millisecond))
	}

	qrng := rand.New(rand.NewPCG(3, 3))
	rank := func(lo, hi int) string { return c.words[lo+qrng.IntN(hi-lo)] }
	cjkWord := func(match func(n int) bool) string {
		for {
			if w := c.cjkWords[qrng.IntN(len(c.cjkWords))]; match(runeLen(w)) {
				return w
			}
		}
	}
	kinds := []struct {
		name  string
		query func() string
	}{
		// In a message of about 30 words, a word of Zipf rank 20 is in
		// about 15% of messages, rank 200 in 1.3%, rank 1000 in 0.2%.
		{"english-common", func() string { return rank(20, 200) }},
		{"english-rare", func() string { return rank(1000, benchVocabulary) }},
		{"english-two-words", func() string { return rank(20, 2000) + " " + rank(20, 2000) }},
		{"english-phrase", func() string { return `"` + rank(0, 50) + " " + rank(0, 50) + `"` }},
		{"english-prefix", func() string { return rank(20, 2000)[:4] + "*" }},
		{"cjk-trigram", func() string { return cjkWord(func(n int) bool { return n >= 3 }) }},
		{"cjk-like", func() string { return cjkWord(func(n int) bool { return n == 2 }) }},
		{"filtered", func() string { return rank(20, 2000) }},
	}
	// mixed draws each query from any kind above.
	kinds = append(kinds, struct {
		name  string
		query func() string
	}{"mixed", func() string { return kinds[qrng.IntN(len(kinds))].query() }})
	ctx := context.Background()
	// The first full-text search of each index reads the length of
	// every row into memory (the fast path's copy of %_docsize); it is
	// timed here, once, and kept out of the percentiles.
	warm := []string{c.words[0]}
	for _, w := range c.cjkWords {
		if runeLen(w) >= 3 {
			warm = append(warm, w)
			break
		}
	}
	for _, q := range warm {
		start, startCPU := time.Now(), processCPU(b)
		if _, err := p.Search(ctx, SearchQuery{Query: q}); err != nil {
			b.Fatal(err)
		}
		p.ranker.WaitLengths()
		b.Logf("first search %q and the lengths read: %s (%s CPU)", q, time.Since(start).Round(time.Millisecond), (processCPU(b) - startCPU).Round(time.Millisecond))
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			var lat, cpu []time.Duration
			for b.Loop() {
				q := SearchQuery{Query: k.query()}
				if k.name == "filtered" {
					q.Roles, q.ExcludeSources = []string{"user"}, []string{"discord"}
				}
				start, startCPU := time.Now(), processCPU(b)
				if _, err := p.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				cpu = append(cpu, processCPU(b)-startCPU)
			}
			pct := func(d []time.Duration, f float64) float64 {
				slices.Sort(d)
				return float64(d[min(len(d)-1, int(f*float64(len(d))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(lat, 0.50), "p50-ms")
			b.ReportMetric(pct(lat, 0.95), "p95-ms")
			// The process's CPU time per search (all threads, the
			// garbage collector's included): less moved by other
			// processes on a shared machine than the wall time.
			b.ReportMetric(pct(cpu, 0.50), "cpu-p50-ms")
			b.ReportMetric(pct(cpu, 0.95), "cpu-p95-ms")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApplyLive measures the live path: b.N events applied in batches
// of 64 (what the runner gathers in 20 ms under 16 writers), both FTS
// indexes maintained, and reports the process's CPU time per event.
func BenchmarkApplyLive(b *testing.B) {
	envs := newCorpus(1, 200).events(b.N)
	p := openTemp(b)
	applyLiveBatches(b, p, envs)
}

// applyLiveBatches is the timed part of the live-path benchmarks: envs
// applied in batches of 64 (what the runner gathers in 20 ms under 16
// writers), reported as the process's CPU time per event.
func applyLiveBatches(b *testing.B, p *Projection, envs []events.Envelope) {
	const perBatch = 64
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < len(envs); i += perBatch {
		if err := p.Apply(context.Background(), envs[i:min(i+perBatch, len(envs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/event")
}

// BenchmarkApplyLiveTurns is BenchmarkApplyLive on the events of agent
// turns over 200 open sessions: each turn appends a user and an assistant
// message (about 200 characters each), updates the session's tokens and
// touches its lane; b.N events in batches of 64.
func BenchmarkApplyLiveTurns(b *testing.B) {
	c := newCorpus(1, 200)
	for i, key := range c.lanes {
		sid := fmt.Sprintf("20260301_000000_turns%03d", i)
		c.current[key] = sid
		c.h.lane(key, created(key, sid, c.now))
	}
	opened := len(c.h.all)
	for len(c.h.all) < opened+b.N {
		c.now = c.now.Add(time.Duration(c.rng.IntN(2000)) * time.Millisecond)
		key := c.lanes[c.rng.IntN(len(c.lanes))]
		sid := c.current[key]
		c.h.tr(sid, appended(sid, text("user", c.text()), c.now))
		c.h.tr(sid, appended(sid, text("assistant", c.text()), c.now))
		c.h.tr(sid, events.SessionMetadataUpdated{SessionID: sid, InputTokens: 900, OutputTokens: 120, APICallCount: 1, At: c.now})
		c.h.lane(key, events.Touched{At: c.now})
	}
	envs := c.h.all[opened : opened+b.N]
	p := openTemp(b)
	mustApply(b, p, c.h.all[:opened])
	applyLiveBatches(b, p, envs)
}
