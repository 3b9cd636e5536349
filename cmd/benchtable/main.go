// Command benchtable reads `go test -bench` output (as `make bench` keeps it
// in bench.out) and prints hermes' benchmark summary: each figure next to
// its goal and, where one was measured in the same run, its ratio to the
// physical limit of the machine. When a benchmark ran several times
// (-count), the median of its runs is shown.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row is one line of the summary: a metric of a benchmark and its goal.
type row struct {
	what   string
	bench  string // benchmark name without the -N GOMAXPROCS suffix
	metric string
	goal   string
	// met reports whether value meets the goal (nil: no goal).
	met func(v float64) bool
	// limit names the benchmark metric this figure is a share of.
	limitBench, limitMetric string
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func below(n float64) func(float64) bool   { return func(v float64) bool { return v < n } }
func atMost(n float64) func(float64) bool  { return func(v float64) bool { return v <= n } }

var rows = []row{
	{what: "raw fsync'd single-row commits", bench: "BenchmarkRawCommit", metric: "commits/s"},
	{what: "raw batched inserts (no fsync)", bench: "BenchmarkRawBatchedInsert/rows-per-insert=64", metric: "rows/s"},
	{what: "durable appends, 1 appender", bench: "BenchmarkAppend/appenders=1", metric: "events/s", goal: "≥ 1 fsync/append", limitBench: "BenchmarkRawCommit", limitMetric: "commits/s"},
	{what: "  p50 / p99 latency (µs)", bench: "BenchmarkAppend/appenders=1", metric: "p50-µs|p99-µs"},
	{what: "durable appends, 8 appenders", bench: "BenchmarkAppend/appenders=8", metric: "events/s", limitBench: "BenchmarkRawBatchedInsert/rows-per-insert=64", limitMetric: "rows/s"},
	{what: "  p50 / p99 latency (µs)", bench: "BenchmarkAppend/appenders=8", metric: "p50-µs|p99-µs"},
	{what: "durable appends, 64 appenders", bench: "BenchmarkAppend/appenders=64", metric: "events/s", goal: "≥ 100,000", met: atLeast(100_000), limitBench: "BenchmarkRawBatchedInsert/rows-per-insert=64", limitMetric: "rows/s"},
	{what: "  p50 / p99 latency (µs)", bench: "BenchmarkAppend/appenders=64", metric: "p50-µs|p99-µs"},
	{what: "resolve in-process, 10k lanes, 1 caller: p50 / p99 (µs)", bench: "BenchmarkResolveExisting/lanes=10000/callers=1", metric: "p50-µs|p99-µs"},
	{what: "resolve in-process, 100k lanes, 1 caller: p99 (µs)", bench: "BenchmarkResolveExisting/lanes=100000/callers=1", metric: "p99-µs", goal: "< 1,000", met: below(1000)},
	{what: "resolve in-process, 100k lanes, 64 callers", bench: "BenchmarkResolveExisting/lanes=100000/callers=64", metric: "resolves/s"},
	{what: "  p50 / p99 latency (µs)", bench: "BenchmarkResolveExisting/lanes=100000/callers=64", metric: "p50-µs|p99-µs"},
	{what: "cold lane load, 1,000 events, snapshots: p50 (µs)", bench: "BenchmarkLoadLane/events=1000/snapshots=on", metric: "p50-µs"},
	{what: "cold lane load, 1,000 events, no snapshots: p50 (µs)", bench: "BenchmarkLoadLane/events=1000/snapshots=off", metric: "p50-µs"},
	{what: "cold lane load, 1,000,000 events, snapshots: p50 (µs)", bench: "BenchmarkLoadLane/events=1000000/snapshots=on", metric: "p50-µs"},
	{what: "  ÷ p50 of a 1,000-event lane (same run)", bench: "BenchmarkLoadLane/events=1000000/snapshots=on", metric: "x-ref-p50", goal: "≤ 2", met: atMost(2)},
	{what: "cold lane load, 1,000,000 events, no snapshots: p50 (µs)", bench: "BenchmarkLoadLane/events=1000000/snapshots=off", metric: "p50-µs"},
	{what: "resolve over HTTP (loopback, 64 clients)", bench: "BenchmarkServe", metric: "resolve-req/s", goal: "≥ 10,000", met: atLeast(10_000)},
	{what: "  p50 / p99 latency (µs)", bench: "BenchmarkServe", metric: "p50-µs|p99-µs"},
	{what: "resident memory of hermes serve (MB)", bench: "BenchmarkServe", metric: "RSS-MB"},
	{what: "  growth per 100,000 lanes (MB)", bench: "BenchmarkServe", metric: "MB-per-100k-lanes", goal: "< 200", met: below(200)},
	{what: "restart to ready (ms)", bench: "BenchmarkServe", metric: "restart-to-ready-ms", goal: "< 1,000", met: below(1000)},
	{what: "full rebuild (lanes + state.db, both FTS)", bench: "BenchmarkRebuild", metric: "events/s", goal: "≥ 50,000", met: atLeast(50_000)},
	{what: "read models reopen + catch-up after restart (ms)", bench: "BenchmarkRebuild", metric: "reopen-ms", goal: "< 1,000", met: below(1000)},
	{what: "search p50 / p95 (ms), mixed queries", bench: "BenchmarkSearch/mixed", metric: "p50-ms|p95-ms"},
	{what: "search p95 (ms), mixed queries", bench: "BenchmarkSearch/mixed", metric: "p95-ms", goal: "< 20", met: below(20)},
	{what: "  common English word p50 / p95 (ms)", bench: "BenchmarkSearch/english-common", metric: "p50-ms|p95-ms"},
	{what: "  rare English word p50 / p95 (ms)", bench: "BenchmarkSearch/english-rare", metric: "p50-ms|p95-ms"},
	{what: "  phrase p50 / p95 (ms)", bench: "BenchmarkSearch/english-phrase", metric: "p50-ms|p95-ms"},
	{what: "  prefix p50 / p95 (ms)", bench: "BenchmarkSearch/english-prefix", metric: "p50-ms|p95-ms"},
	{what: "  CJK trigram p50 / p95 (ms)", bench: "BenchmarkSearch/cjk-trigram", metric: "p50-ms|p95-ms"},
	{what: "  CJK short terms (LIKE) p50 / p95 (ms)", bench: "BenchmarkSearch/cjk-like", metric: "p50-ms|p95-ms"},
	{what: "  filtered p50 / p95 (ms)", bench: "BenchmarkSearch/filtered", metric: "p50-ms|p95-ms"},
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse collects every metric of every benchmark line, by name.
func parse(r io.Reader) map[string]map[string][]float64 {
	out := map[string]map[string][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if out[m[1]] == nil {
				out[m[1]] = map[string][]float64{}
			}
			out[m[1]][f[i+1]] = append(out[m[1]][f[i+1]], v)
		}
	}
	return out
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return addCommas(strconv.FormatFloat(v, 'f', 0, 64))
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func addCommas(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	data := parse(in)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tMEASURED\tGOAL\tMET\tOF PHYSICAL LIMIT")
	for _, r := range rows {
		metrics := data[r.bench]
		var vals []string
		var first float64
		ok := metrics != nil
		for i, m := range strings.Split(r.metric, "|") {
			vs := metrics[m]
			if len(vs) == 0 {
				ok = false
				break
			}
			v := median(vs)
			if i == 0 {
				first = v
			}
			vals = append(vals, format(v))
		}
		if !ok {
			fmt.Fprintf(tw, "%s\t(not run)\t%s\t\t\n", r.what, r.goal)
			continue
		}
		met := ""
		if r.met != nil {
			met = "yes"
			if !r.met(first) {
				met = "NO"
			}
		}
		ratio := ""
		if lim := data[r.limitBench][r.limitMetric]; len(lim) > 0 && median(lim) > 0 {
			ratio = fmt.Sprintf("%.0f%% of %s %s", 100*first/median(lim), format(median(lim)), r.limitMetric)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.what, strings.Join(vals, " / "), r.goal, met, ratio)
	}
	tw.Flush()
}
