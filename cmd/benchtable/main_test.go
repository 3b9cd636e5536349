package main

import (
	"strings"
	"testing"
)

func TestParseTakesEveryMetricAndTheMedian(t *testing.T) {
	out := `goos: linux
BenchmarkAppend/appenders=64-2   	  107865	     32726 ns/op	     30557 events/s	      1890 p50-µs	      6437 p99-µs
BenchmarkAppend/appenders=64-2   	  107865	     32726 ns/op	     10000 events/s	      1890 p50-µs	      6437 p99-µs
BenchmarkAppend/appenders=64-2   	  107865	     32726 ns/op	     20000 events/s	      1890 p50-µs	      6437 p99-µs
BenchmarkRawCommit-2             	    9771	    381642 ns/op	      2620 commits/s
PASS`
	got := parse(strings.NewReader(out))
	if n := len(got["BenchmarkAppend/appenders=64"]["events/s"]); n != 3 {
		t.Fatalf("parsed %d events/s values, want 3", n)
	}
	if m := median(got["BenchmarkAppend/appenders=64"]["events/s"]); m != 20000 {
		t.Fatalf("median = %v, want 20000", m)
	}
	if v := got["BenchmarkRawCommit"]["commits/s"]; len(v) != 1 || v[0] != 2620 {
		t.Fatalf("RawCommit commits/s = %v", v)
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[float64]string{150861: "150,861", 947: "947", 4.6061: "4.61", 1000000: "1,000,000"} {
		if got := format(in); got != want {
			t.Errorf("format(%v) = %q, want %q", in, got, want)
		}
	}
}
