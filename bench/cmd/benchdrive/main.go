// Command benchdrive drives the benchmark server (bench/cmd/benchserver) over loopback HTTP and
// prints the results as Markdown: throughput, latency, server CPU per request and database round
// trips per request for each variant, interleaved over several rounds, with the median of the
// per-round ratios against the baselines; then a same-key storm.
//
//	benchdrive -url http://127.0.0.1:8080 -pid 1234 [-rounds 5] [-duration 3s] [-short]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/bench/internal/load"
)

type variant struct {
	name  string
	path  string // server path
	build func(base string, run string) load.Builder
}

const paymentBody = `{"amount": 1500, "currency": "EUR", "to": "acc_123", "description": "benchmark"}`

func headers(tenant, key string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + tenant}, "Content-Type": {"application/json"}}
	if key != "" {
		h["Idempotency-Key"] = []string{key}
	}
	return h
}

// freshKey sends every request with a new key: the path of a first attempt.
func freshKey(path, body string) func(string, string) load.Builder {
	return func(base, run string) load.Builder {
		return func(n int64) load.Request {
			return load.Request{Method: "POST", URL: base + path, Header: headers("bench-"+run, fmt.Sprintf("key-%s-%012d", run, n)), Body: []byte(body)}
		}
	}
}

// sameKey sends every request with one key (prepared by a first request): the replay path,
// or with a different body the mismatch path.
func sameKey(path, body string) func(string, string) load.Builder {
	return func(base, run string) load.Builder {
		return func(n int64) load.Request {
			return load.Request{Method: "POST", URL: base + path, Header: headers("bench-"+run, "key-"+run+"-replayed-0000"), Body: []byte(body)}
		}
	}
}

var variants = []variant{
	{"bare handler (no database)", "/bench/bare", freshKey("/bench/bare", paymentBody)},
	{"plain transaction (no idempotency)", "/bench/plain", freshKey("/bench/plain", paymentBody)},
	{"hand-written recipe, new key", "/bench/handwritten", freshKey("/bench/handwritten", paymentBody)},
	{"idemgen atomic, new key", "/v1/payments", freshKey("/v1/payments", paymentBody)},
	{"idemgen lease, new key", "/v1/provider-charges", freshKey("/v1/provider-charges", `{"amount": 800}`)},
	{"hand-written recipe, replay", "/bench/handwritten", sameKey("/bench/handwritten", paymentBody)},
	{"idemgen replay", "/v1/payments", sameKey("/v1/payments", paymentBody)},
	{"idemgen mismatch (422)", "/v1/payments", sameKey("/v1/payments", `{"amount": 1501, "currency": "EUR", "to": "acc_123"}`)},
}

type sample struct {
	rps      float64
	p50, p99 time.Duration
	cpuUS    float64 // server CPU microseconds per request
	rt       float64 // database round trips per request
	statuses map[string]int64
}

func main() {
	var (
		base     = flag.String("url", "http://127.0.0.1:8080", "benchmark server base URL")
		pid      = flag.Int("pid", 0, "benchmark server process id (for CPU per request); 0 to skip")
		rounds   = flag.Int("rounds", 5, "rounds; variants are interleaved within each round")
		duration = flag.Duration("duration", 3*time.Second, "time per variant per concurrency per round")
		concs    = flag.String("concurrency", "1,8,16,32", "comma-separated concurrency levels")
		storm    = flag.Int("storm", 200, "copies of one request in the same-key storm")
		short    = flag.Bool("short", false, "smoke mode: 1 round, 200ms per variant, concurrency 1,8, storm 20")
	)
	flag.Parse()
	if *short {
		*rounds, *duration, *concs, *storm = 1, 200*time.Millisecond, "1,8", 20
	}
	levels, err := parseInts(*concs)
	if err != nil {
		fatalf("bad -concurrency: %v", err)
	}
	ctx := context.Background()
	client := load.NewClient(64)

	// results[variant][concurrency] = samples over rounds
	results := map[string]map[int][]sample{}
	for r := 0; r < *rounds; r++ {
		for _, c := range levels {
			for vi, v := range variants {
				run := fmt.Sprintf("r%dc%dv%d-%d", r, c, vi, time.Now().UnixNano())
				build := v.build(*base, run)
				if strings.Contains(v.name, "replay") || strings.Contains(v.name, "mismatch") {
					prime(ctx, client, *base, v, run)
				}
				s, err := measure(ctx, client, *base, *pid, c, *duration, build)
				if err != nil {
					fatalf("%s at concurrency %d: %v", v.name, c, err)
				}
				if results[v.name] == nil {
					results[v.name] = map[int][]sample{}
				}
				results[v.name][c] = append(results[v.name][c], s)
			}
		}
	}
	printTable(os.Stdout, levels, results, *rounds, *duration)
	stormReport(ctx, os.Stdout, *base, *storm)
}

// prime makes the record the replay and mismatch variants hit: the first request with the key,
// always with the payment body.
func prime(ctx context.Context, c *http.Client, base string, v variant, run string) {
	req := sameKey(v.path, paymentBody)(base, run)(0)
	labels, _, err := load.Once(ctx, c, 1, req)
	if err != nil || len(labels) != 1 || (labels[0] != "201" && labels[0] != "replayed") {
		fatalf("priming %s: %v %v", v.name, labels, err)
	}
}

func measure(ctx context.Context, c *http.Client, base string, pid, conc int, d time.Duration, build load.Builder) (sample, error) {
	_ = roundTrips(ctx, c, base) // reset
	cpu0 := cpuTime(pid)
	res, err := load.Run(ctx, c, conc, d, build)
	if err != nil {
		return sample{}, err
	}
	cpu1 := cpuTime(pid)
	rt := roundTrips(ctx, c, base)
	s := sample{rps: res.RPS(), p50: res.Quantile(0.5), p99: res.Quantile(0.99), statuses: res.Statuses}
	if res.Requests > 0 {
		s.cpuUS = float64((cpu1 - cpu0).Microseconds()) / float64(res.Requests)
		s.rt = float64(rt) / float64(res.Requests)
	}
	return s, nil
}

// roundTrips reads and resets the server's database round-trip counter.
func roundTrips(ctx context.Context, c *http.Client, base string) int64 {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/_bench/roundtrips", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var v struct{ RoundTrips int64 }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &v)
	return v.RoundTrips
}

// cpuTime is the user+system CPU time the process has used, from /proc/PID/stat.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields[11] is utime, fields[12] stime (counting from the state field), in clock ticks (100 Hz).
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printTable(w io.Writer, levels []int, results map[string]map[int][]sample, rounds int, d time.Duration) {
	fmt.Fprintf(w, "### HTTP end to end (%d rounds × %s per variant and concurrency; medians over rounds)\n\n", rounds, d)
	fmt.Fprintln(w, "| variant | conc | req/s | p50 ms | p99 ms | server CPU µs/req | DB round trips/req | statuses (last round) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|")
	for _, v := range variants {
		for _, c := range levels {
			ss := results[v.name][c]
			var rps, p50, p99, cpu, rt []float64
			for _, s := range ss {
				rps = append(rps, s.rps)
				p50 = append(p50, float64(s.p50.Microseconds())/1000)
				p99 = append(p99, float64(s.p99.Microseconds())/1000)
				cpu = append(cpu, s.cpuUS)
				rt = append(rt, s.rt)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.2f | %.0f | %.2f | %s |\n", v.name, c, median(rps), median(p50), median(p99), median(cpu), median(rt), statusString(ss[len(ss)-1].statuses))
		}
	}
	ratio := func(num, den string, c int, f func(sample) float64) float64 {
		var rs []float64
		for i := range results[num][c] {
			if d := f(results[den][c][i]); d > 0 {
				rs = append(rs, f(results[num][c][i])/d)
			}
		}
		return median(rs)
	}
	rps := func(s sample) float64 { return s.rps }
	cpu := func(s sample) float64 { return s.cpuUS }
	fmt.Fprintf(w, "\n### Ratios (median of per-round ratios)\n\n")
	fmt.Fprintln(w, "| ratio | target | "+joinLevels(levels)+" |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---:|", len(levels)))
	rows := []struct {
		label, target, num, den string
		f                       func(sample) float64
	}{
		{"atomic new key / plain transaction (req/s)", "≥ 0.6 at 8, 32", "idemgen atomic, new key", "plain transaction (no idempotency)", rps},
		{"atomic new key / hand-written new key (req/s)", "≥ 1.3", "idemgen atomic, new key", "hand-written recipe, new key", rps},
		{"replay / plain transaction (req/s)", "≥ 1.3", "idemgen replay", "plain transaction (no idempotency)", rps},
		{"replay / hand-written replay (req/s)", "≥ 1.3", "idemgen replay", "hand-written recipe, replay", rps},
		{"lease new key / plain transaction (req/s)", "—", "idemgen lease, new key", "plain transaction (no idempotency)", rps},
		{"atomic new key / plain transaction (server CPU per request)", "≤ 2", "idemgen atomic, new key", "plain transaction (no idempotency)", cpu},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "| %s | %s |", row.label, row.target)
		for _, c := range levels {
			fmt.Fprintf(w, " %.2f |", ratio(row.num, row.den, c, row.f))
		}
		fmt.Fprintln(w)
	}
}

func stormReport(ctx context.Context, w io.Writer, base string, n int) {
	run := fmt.Sprintf("storm-%d", time.Now().UnixNano())
	c := load.NewClient(n)
	req := load.Request{Method: "POST", URL: base + "/v1/payments", Header: headers("bench-"+run, "key-"+run+"-0000000000"), Body: []byte(paymentBody)}
	req.Header.Set("X-Test-Delay", "200ms")
	labels, lat, err := load.Once(ctx, c, n, req)
	counts := map[string]int64{}
	var conflicts []time.Duration
	for i, l := range labels {
		counts[l]++
		if l == "409" {
			conflicts = append(conflicts, lat[i])
		}
	}
	slices.Sort(conflicts)
	p99 := time.Duration(0)
	if len(conflicts) > 0 {
		p99 = conflicts[int(0.99*float64(len(conflicts)-1))]
	}
	ran := effects(ctx, c, base, "bench-"+run)
	fmt.Fprintf(w, "\n### Same-key storm: %d concurrent copies of one createPayment (handler sleeps 200 ms)\n\n", n)
	fmt.Fprintln(w, "| handler runs (payments written) | 201 | 409 | replayed | 5xx or errors | p99 of the 409s ms |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	var bad int64
	for l, k := range counts {
		if strings.HasPrefix(l, "5") || l == "error" {
			bad += k
		}
	}
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %.2f |\n", ran, counts["201"], counts["409"], counts["replayed"], bad, float64(p99.Microseconds())/1000)
	if err != nil {
		fmt.Fprintf(w, "\nstorm transport error: %v\n", err)
	}
	if ran != 1 || bad != 0 {
		fatalf("storm: the handler ran %d times (want 1), %d 5xx/errors (want 0)", ran, bad)
	}
}

func effects(ctx context.Context, c *http.Client, base, tenant string) int64 {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_effects", nil)
	req.Header.Set("Authorization", "Bearer "+tenant)
	resp, err := c.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var v map[string]int64
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v["payments"]
}

func statusString(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func joinLevels(levels []int) string {
	var s []string
	for _, l := range levels {
		s = append(s, fmt.Sprintf("c=%d", l))
	}
	return strings.Join(s, " | ")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchdrive: "+format+"\n", args...)
	os.Exit(1)
}
