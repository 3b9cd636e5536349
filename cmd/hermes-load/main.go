// Command hermes-load is a small loopback load generator for hermes serve:
// it resolves existing lanes (get_or_create_session with a durable touch)
// from N concurrent clients for a fixed time and prints requests per second
// and latency percentiles. It refuses any address that is not loopback.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8642", "hermes serve address (loopback only)")
	lanes := flag.Int("lanes", 10000, "lanes to spread the requests over")
	conc := flag.Int("concurrency", 64, "concurrent clients")
	dur := flag.Duration("duration", 10*time.Second, "how long to send requests")
	create := flag.Bool("create", false, "first resolve every lane once (creating it), then measure")
	token := flag.String("token", os.Getenv("HERMES_API_TOKEN"), "bearer token, if the server requires one")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	flag.Parse()

	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		fmt.Fprintf(os.Stderr, "hermes-load: %s is not a loopback address\n", *addr)
		os.Exit(2)
	}
	if *lanes < 1 || *conc < 1 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "hermes-load: --lanes, --concurrency and --duration must be positive")
		os.Exit(2)
	}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc},
	}
	send := func(lane int) (time.Duration, error) {
		body := fmt.Appendf(nil, `{"source":{"platform":"telegram","chat_id":"%d","chat_type":"dm"}}`, 1_000_000+lane)
		req, err := http.NewRequest(http.MethodPost, "http://"+*addr+"/v1/sessions/resolve", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}

	if *create {
		start := time.Now()
		next := make(chan int)
		var wg sync.WaitGroup
		for range *conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if _, err := send(i); err != nil {
						fmt.Fprintln(os.Stderr, "hermes-load: create:", err)
						os.Exit(1)
					}
				}
			}()
		}
		for i := range *lanes {
			next <- i
		}
		close(next)
		wg.Wait()
		fmt.Fprintf(os.Stderr, "created %d lanes in %s\n", *lanes, time.Since(start).Round(time.Millisecond))
	}

	lat := make([][]time.Duration, *conc)
	errs := make([]int, *conc)
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for c := range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			for time.Now().Before(deadline) {
				d, err := send(rng.IntN(*lanes))
				if err != nil {
					errs[c]++
					continue
				}
				lat[c] = append(lat[c], d)
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	failed := 0
	for _, n := range errs {
		failed += n
	}
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(float64(len(all))*p))].Microseconds()) / 1000
	}
	res := map[string]any{
		"requests": len(all), "errors": failed, "seconds": dur.Seconds(),
		"req_per_s": float64(len(all)) / dur.Seconds(),
		"p50_ms":    pct(0.50), "p99_ms": pct(0.99), "concurrency": *conc, "lanes": *lanes,
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("%d requests in %s (%d errors): %.0f req/s, p50 %.2f ms, p99 %.2f ms at concurrency %d over %d lanes\n",
		len(all), *dur, failed, res["req_per_s"], res["p50_ms"], res["p99_ms"], *conc, *lanes)
}
