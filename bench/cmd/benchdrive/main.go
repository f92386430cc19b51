// Command benchdrive drives the benchmark server (bench/cmd/benchserver) over loopback HTTP and
// prints the results as Markdown: throughput, latency, server CPU per request and database round
// trips per request for each variant, interleaved over several rounds, with the median of the
// per-round ratios against the baselines; then a same-key storm.
//
//	benchdrive -url http://127.0.0.1:8080 -pid 1234 [-rounds 5] [-duration 3s] [-wrk /usr/bin/wrk] [-short]
//
// With -old-url it compares two benchservers instead (A/B mode, ab.go; bench/ab/run.sh builds
// and starts them): the server at -url is the new side, the one at -old-url the old side, and
// every selected variant (by default idemgen's atomic new key, replay and lease new key) is
// measured on both, back to back, in every round. -samples appends each pair to a file; -pool
// prints the A/B tables over the pairs of several such files.
//
//	benchdrive -url http://127.0.0.1:8081 -pid 1235 -name HEAD -old-url http://127.0.0.1:8080 -old-pid 1234 -old-name 1b4cdd7 [-samples FILE]
//	benchdrive -pool FILE,FILE...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/bench/internal/load"
	"github.com/idemgen/idemgen/bench/internal/procstat"
)

// variant is one thing measured. Fresh variants send a new key with every request (the path of a
// first attempt); the others send one key, primed by a first request with the payment body, so
// every measured request is a replay (same body) or a mismatch (different body).
type variant struct {
	name  string
	path  string // server path
	body  string
	fresh bool
	// hot, when positive, makes every request a replay of one of hot keys, in turn (the retry
	// storm): all primed first.
	hot int
	// levels, when set, are the only concurrency levels the variant runs at (or the run's
	// highest level when it has none of them).
	levels []int
	// redis: the variant needs the server's Redis (benchserver -redis); skipped without it.
	redis bool
	// framework: the variant is served by the framework adapters' server (bench/frameworks,
	// which answers GET /_bench/frameworks); skipped by any other.
	framework bool
}

// stormKeys is how many hot keys a retry storm replays.
const stormKeys = 4

const paymentBody = `{"amount": 1500, "currency": "EUR", "to": "acc_123", "description": "benchmark"}`

func headers(tenant, key string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + tenant}, "Content-Type": {"application/json"}}
	if key != "" {
		h["Idempotency-Key"] = []string{key}
	}
	return h
}

// builder returns the requests of one measurement; run makes its tenant and keys unique.
func (v variant) builder(base, run string) load.Builder {
	return func(n int64) load.Request {
		key := "key-" + run + "-replayed-0000"
		if v.hot > 0 {
			key = fmt.Sprintf("key-%s-hot-%d", run, n%int64(v.hot))
		}
		if v.fresh {
			// Clients send random keys (UUIDs, mostly), not a sequence: a bijective mix of n
			// spreads them over the key index as theirs do.
			key = fmt.Sprintf("key-%s-%016x", run, mix(uint64(n)))
		}
		base, path := v.target(base)
		return load.Request{Method: "POST", URL: base + path, Header: headers("bench-"+run, key), Body: []byte(v.body)}
	}
}

// fiberPrefix marks the path of a variant served by bench/frameworks' fiber app, on fasthttp
// with a listener of its own (-fiber-url), not by the net/http server at -url.
const fiberPrefix = "fiber:"

// fiberURL is -fiber-url: the base URL of bench/frameworks' fiber app ("" skips its variants).
var fiberURL string

// target returns the base URL and path of v's requests.
func (v variant) target(base string) (string, string) {
	if path, ok := strings.CutPrefix(v.path, fiberPrefix); ok {
		return fiberURL, path
	}
	return base, v.path
}

// mix is splitmix64's finalizer: a bijection on 64-bit integers whose outputs look random.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// The variants, in table order. The names are referred to by the ratio rows below.
const (
	vBare         = "bare handler (no database)"
	vPlain        = "plain transaction (no idempotency)"
	vHandNew      = "hand-written recipe, new key"
	vAtomicNew    = "idemgen atomic, new key"
	vLeaseNew     = "idemgen lease, new key"
	vHandReplay   = "hand-written recipe, replay"
	vReplay       = "idemgen replay"
	vMismatch     = "idemgen mismatch (422)"
	vStmtNew      = "A/B ClaimWithStatement, new key"
	vReadFirstNew = "A/B ClaimReadFirst, new key"
	vPipeNew      = "A/B ClaimPipelined, new key"
	vStmtReplay   = "A/B ClaimWithStatement, replay"
	vReadFirstRep = "A/B ClaimReadFirst, replay"
	vPipeReplay   = "A/B ClaimPipelined, replay"
	vMwNew        = "middleware (ClaimWithStatement), new key"
	vMwReplay     = "middleware (ClaimWithStatement), replay"
	vMwLockNew    = "middleware (ClaimWithStatement LockAtRead), new key"
	vMwLockReplay = "middleware (ClaimWithStatement LockAtRead), replay"
	vCacheReplay  = "idemgen replay via Redis cache"
	vLocalReplay  = "idemgen replay via Redis cache + in-process tier"
	vCacheNew     = "idemgen atomic, new key via Redis cache"
	vRedisLease   = "idemgen lease, new key on Redis (paired with PostgreSQL)"
	vStormPG      = "retry storm (4 hot keys) via PostgreSQL"
	vStormCache   = "retry storm (4 hot keys) via Redis cache"
	vStormLocal   = "retry storm (4 hot keys) via Redis cache + in-process tier"
	vPartNew      = "A/B partitioned table, new key"
	vPartReplay   = "A/B partitioned table, replay"
	vEchoNew      = "echo adapter (ClaimWithStatement), new key"
	vEchoReplay   = "echo adapter (ClaimWithStatement), replay"
	vGinNew       = "gin adapter (ClaimWithStatement), new key"
	vGinReplay    = "gin adapter (ClaimWithStatement), replay"
	vFiberNew     = "fiber adapter (ClaimWithStatement), new key"
	vFiberReplay  = "fiber adapter (ClaimWithStatement), replay"
	vHumaNew      = "huma adapter (ClaimWithStatement), new key"
	vHumaReplay   = "huma adapter (ClaimWithStatement), replay"
	vFloor        = "floor: plain transaction + a record row (floor_records)"
	vFloorPart    = "floor, partitioned table: plain transaction + a record row"
	vNoCapNew     = "A/B ClaimWithStatement without the stored-bytes cap, new key"
	vGenericNew   = "A/B ClaimWithStatement with generic plans, new key"
)

var variants = []variant{
	{vBare, "/bench/bare", paymentBody, true, 0, nil, false, false},
	{vPlain, "/bench/plain", paymentBody, true, 0, nil, false, false},
	{vHandNew, "/bench/handwritten", paymentBody, true, 0, nil, false, false},
	{vAtomicNew, "/v1/payments", paymentBody, true, 0, nil, false, false},
	{vLeaseNew, "/v1/provider-charges", `{"amount": 800}`, true, 0, nil, false, false},
	{vHandReplay, "/bench/handwritten", paymentBody, false, 0, nil, false, false},
	{vReplay, "/v1/payments", paymentBody, false, 0, nil, false, false},
	{vMismatch, "/v1/payments", `{"amount": 1501, "currency": "EUR", "to": "acc_123"}`, false, 0, nil, false, false},
	{vStmtNew, "/ab/withstatement/v1/payments", paymentBody, true, 0, nil, false, false},
	{vReadFirstNew, "/ab/readfirst/v1/payments", paymentBody, true, 0, nil, false, false},
	{vPipeNew, "/ab/pipelined/v1/payments", paymentBody, true, 0, nil, false, false},
	{vStmtReplay, "/ab/withstatement/v1/payments", paymentBody, false, 0, nil, false, false},
	{vReadFirstRep, "/ab/readfirst/v1/payments", paymentBody, false, 0, nil, false, false},
	{vPipeReplay, "/ab/pipelined/v1/payments", paymentBody, false, 0, nil, false, false},
	{vMwNew, "/mw/v1/payments", paymentBody, true, 0, nil, false, false},
	{vMwReplay, "/mw/v1/payments", paymentBody, false, 0, nil, false, false},
	{vMwLockNew, "/mw-lockatread/v1/payments", paymentBody, true, 0, nil, false, false},
	{vMwLockReplay, "/mw-lockatread/v1/payments", paymentBody, false, 0, nil, false, false},
	{vCacheReplay, "/redis/cache/v1/payments", paymentBody, false, 0, nil, true, false},
	{vLocalReplay, "/redis/local/v1/payments", paymentBody, false, 0, nil, true, false},
	{vCacheNew, "/redis/cache/v1/payments", paymentBody, true, 0, []int{8, 32}, true, false},
	{vRedisLease, "/redis/lease/v1/provider-charges", `{"amount": 800}`, true, 0, nil, true, false},
	{vStormPG, "/v1/payments", paymentBody, false, stormKeys, []int{32}, false, false},
	{vStormCache, "/redis/cache/v1/payments", paymentBody, false, stormKeys, []int{32}, true, false},
	{vStormLocal, "/redis/local/v1/payments", paymentBody, false, stormKeys, []int{32}, true, false},
	{vPartNew, "/ab/partitioned/v1/payments", paymentBody, true, 0, nil, false, false},
	{vPartReplay, "/ab/partitioned/v1/payments", paymentBody, false, 0, nil, false, false},
	{vEchoNew, "/echo/v1/payments", paymentBody, true, 0, nil, false, true},
	{vEchoReplay, "/echo/v1/payments", paymentBody, false, 0, nil, false, true},
	{vGinNew, "/gin/v1/payments", paymentBody, true, 0, nil, false, true},
	{vGinReplay, "/gin/v1/payments", paymentBody, false, 0, nil, false, true},
	{vFiberNew, fiberPrefix + "/v1/payments", paymentBody, true, 0, nil, false, true},
	{vFiberReplay, fiberPrefix + "/v1/payments", paymentBody, false, 0, nil, false, true},
	{vHumaNew, "/huma/v1/payments", paymentBody, true, 0, nil, false, true},
	{vHumaReplay, "/huma/v1/payments", paymentBody, false, 0, nil, false, true},
	{vFloor, "/bench/floor", paymentBody, true, 0, nil, false, false},
	{vFloorPart, "/bench/floor-partitioned", paymentBody, true, 0, nil, false, false},
	{vNoCapNew, "/ab/nocap/v1/payments", paymentBody, true, 0, nil, false, false},
	{vGenericNew, "/ab/generic/v1/payments", paymentBody, true, 0, nil, false, false},
}

type sample struct {
	rps      float64
	p50, p99 time.Duration
	cpuUS    float64 // benchserver CPU microseconds per request (user + system)
	dbCPUUS  float64 // PostgreSQL CPU microseconds per request (every server process)
	cliCPUUS float64 // this load generator's CPU microseconds per request
	rdCPUUS  float64 // the Redis server's CPU microseconds per request
	rt       float64 // database round trips per request
	// allocs and allocKB: the server's heap allocations (objects, KiB) per request, from the
	// runtime's MemStats at /debug/pprof/heap?debug=1. The counts are exact, and replays' are
	// steady (within 2% in an A/A run), but what a request does can move with the load (a claim
	// timer that fires, a wait for a pooled connection) and the server's background work is
	// divided by fewer requests at low throughput: new keys at c=1 varied by up to ±45% per
	// round in an A/A run on a loaded machine (medians within 7%). 0 when not served.
	allocs, allocKB float64
	walB            float64 // WAL bytes per request (everything the server wrote meanwhile)
	statuses        map[string]int64
}

func main() {
	var (
		base     = flag.String("url", "http://127.0.0.1:8080", "benchmark server base URL")
		pid      = flag.Int("pid", 0, "benchmark server process id (for CPU per request); 0 to skip")
		rounds   = flag.Int("rounds", 5, "rounds; variants are interleaved within each round")
		duration = flag.Duration("duration", 3*time.Second, "time per variant per concurrency per round")
		concs    = flag.String("concurrency", "1,8,16,32", "comma-separated concurrency levels")
		storm    = flag.Int("storm", 200, "copies of one request in the same-key storm")
		only     = flag.String("only", "", "measure only the variants whose name matches this regexp")
		fiber    = flag.String("fiber-url", "", "base URL of bench/frameworks' fiber app (fasthttp, its own listener); empty skips the fiber variants")
		short    = flag.Bool("short", false, "smoke mode: 1 round, 200ms per variant, concurrency 1,8, storm 20")
		wrk      = flag.String("wrk", "", "path of wrk (4.x) to generate the HTTP load with; empty: the Go generator (package load)")
		name     = flag.String("name", "new", "A/B mode: the name of the server at -url (a revision)")
		oldURL   = flag.String("old-url", "", "A/B mode: base URL of the server to compare -url's with (another revision's benchserver)")
		oldPID   = flag.Int("old-pid", 0, "A/B mode: the -old-url server's process id (for CPU per request)")
		oldName  = flag.String("old-name", "old", "A/B mode: the name of the server at -old-url")
		samples  = flag.String("samples", "", "A/B mode: append every measured pair to this file (for -pool)")
		pool     = flag.String("pool", "", "print the A/B tables over the pairs of these comma-separated -samples files, and measure nothing")
	)
	flag.Parse()
	if *pool != "" {
		poolAB(strings.Split(*pool, ","))
		return
	}
	if *short {
		*rounds, *duration, *concs, *storm = 1, 200*time.Millisecond, "1,8", 20
	}
	levels, err := parseInts(*concs)
	if err != nil {
		fatalf("bad -concurrency: %v", err)
	}
	if *oldURL != "" {
		runAB(context.Background(), load.NewClient(64), *wrk, abServer{name: *oldName, base: *oldURL, pid: *oldPID},
			abServer{name: *name, base: *base, pid: *pid}, *only, levels, *rounds, *duration, *samples)
		return
	}
	selected := variants
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fatalf("bad -only: %v", err)
		}
		selected = nil
		for _, v := range variants {
			if re.MatchString(v.name) {
				selected = append(selected, v)
			}
		}
	}
	ctx := context.Background()
	client := load.NewClient(64)
	postmaster := postmasterPID(ctx, client, *base)
	if _, ok := redisCPU(ctx, client, *base); !ok {
		var kept []variant
		for _, v := range selected {
			if !v.redis {
				kept = append(kept, v)
			}
		}
		if len(kept) < len(selected) {
			fmt.Fprintln(os.Stderr, "benchdrive: the server has no Redis (benchserver -redis): the Redis variants are skipped")
		}
		selected = kept
	}
	fiberURL = *fiber
	{
		served := frameworksServed(ctx, client, *base)
		var kept []variant
		for _, v := range selected {
			if v.framework && !served || strings.HasPrefix(v.path, fiberPrefix) && fiberURL == "" {
				continue
			}
			kept = append(kept, v)
		}
		if len(kept) < len(selected) && *only != "" {
			fmt.Fprintln(os.Stderr, "benchdrive: the server is not bench/frameworks (or -fiber-url is not set): the adapters' variants are skipped")
		}
		selected = kept
	}

	// results[variant][concurrency] = samples over rounds. Within a round every variant runs at
	// every level; the order of the variants rotates from round to round, so that no variant
	// always follows the same neighbour (a checkpoint or autovacuum set off by the previous one).
	results := map[string]map[int][]sample{}
	for r := 0; r < *rounds; r++ {
		for _, c := range levels {
			for i := range selected {
				v := selected[(i+r)%len(selected)]
				if !v.runsAt(c, levels) {
					continue
				}
				run := fmt.Sprintf("r%dc%d-%d", r, c, time.Now().UnixNano())
				if !v.fresh {
					prime(ctx, client, *base, v, run)
				}
				s, err := measure(ctx, client, *wrk, *base, *pid, postmaster, c, *duration, v, run)
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
	printTable(os.Stdout, selected, levels, results, *rounds, *duration)
	printFloor(os.Stdout, levels, results)
	if *only == "" || regexp.MustCompile(*only).MatchString("storm") {
		stormReport(ctx, os.Stdout, *base, *storm)
	}
}

// runsAt reports whether v runs at concurrency c in a run of levels.
func (v variant) runsAt(c int, levels []int) bool {
	if len(v.levels) == 0 || slices.Contains(v.levels, c) {
		return true
	}
	for _, l := range v.levels {
		if slices.Contains(levels, l) {
			return false
		}
	}
	return c == slices.Max(levels)
}

// prime makes the records the replay, mismatch and storm variants hit: the first request with
// each key, always with the payment body.
func prime(ctx context.Context, c *http.Client, base string, v variant, run string) {
	pv := v
	pv.body = paymentBody
	for n := range max(v.hot, 1) {
		labels, _, err := load.Once(ctx, c, 1, pv.builder(base, run)(int64(n)))
		if err != nil || len(labels) != 1 || (labels[0] != "201" && labels[0] != "replayed") {
			fatalf("priming %s: %v %v", v.name, labels, err)
		}
	}
}

// measure runs one variant at one concurrency and what it cost: server, PostgreSQL and load
// generator CPU per request and database round trips per request.
func measure(ctx context.Context, c *http.Client, wrk, base string, pid, postmaster, conc int, d time.Duration, v variant, run string) (sample, error) {
	_ = roundTrips(ctx, c, base) // reset
	m0, b0, memOK0 := mallocs(ctx, c, base)
	wal0 := walPosition(ctx, c, base)
	cpu0, db0, cli0 := procstat.CPUTime(pid), procstat.TreeCPUTime(postmaster), procstat.CPUTime(os.Getpid())
	rd0, _ := redisCPU(ctx, c, base)
	var (
		s        sample
		requests int64
		cliCPU   time.Duration
	)
	if wrk != "" {
		o, err := runWrk(ctx, wrk, base, v, run, conc, d)
		if err != nil {
			return sample{}, err
		}
		requests, cliCPU = o.requests, o.cpu
		s = sample{p50: o.p50, p99: o.p99, statuses: o.statuses}
		if o.elapsed > 0 {
			s.rps = float64(o.requests) / o.elapsed.Seconds()
		}
		if o.errors > 0 {
			s.statuses["transport-error"] = o.errors
		}
	} else {
		res, err := load.Run(ctx, c, conc, d, v.builder(base, run))
		if err != nil {
			return sample{}, err
		}
		requests = res.Requests
		s = sample{rps: res.RPS(), p50: res.Quantile(0.5), p99: res.Quantile(0.99), statuses: res.Statuses}
		if res.Errors > 0 {
			s.statuses["transport-error"] = res.Errors
		}
	}
	cpu1, db1, cli1 := procstat.CPUTime(pid), procstat.TreeCPUTime(postmaster), procstat.CPUTime(os.Getpid())
	rd1, _ := redisCPU(ctx, c, base)
	if wrk == "" {
		cliCPU = cli1 - cli0
	}
	m1, b1, memOK1 := mallocs(ctx, c, base)
	rt := roundTrips(ctx, c, base)
	if requests > 0 && memOK0 && memOK1 {
		s.allocs = float64(m1-m0) / float64(requests)
		s.allocKB = float64(b1-b0) / 1024 / float64(requests)
	}
	wal1 := walPosition(ctx, c, base)
	if requests > 0 {
		s.walB = float64(wal1-wal0) / float64(requests)
		s.cpuUS = float64((cpu1 - cpu0).Microseconds()) / float64(requests)
		s.dbCPUUS = float64((db1 - db0).Microseconds()) / float64(requests)
		s.cliCPUUS = float64(cliCPU.Microseconds()) / float64(requests)
		s.rdCPUUS = (rd1 - rd0) * 1e6 / float64(requests)
		s.rt = float64(rt) / float64(requests)
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

// mallocs reads the server's cumulative heap allocations (objects and bytes) from the MemStats
// lines that /debug/pprof/heap?debug=1 ends with.
func mallocs(ctx context.Context, c *http.Client, base string) (objects, bytes uint64, ok bool) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/debug/pprof/heap?debug=1", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	var gotM, gotB bool
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "# Mallocs = "); found {
			objects, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			gotM = err == nil
		}
		if v, found := strings.CutPrefix(line, "# TotalAlloc = "); found {
			bytes, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			gotB = err == nil
		}
	}
	return objects, bytes, gotM && gotB
}

// walPosition reads the server's WAL position in bytes; 0 when it cannot.
func walPosition(ctx context.Context, c *http.Client, base string) int64 {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_bench/wal", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// redisCPU asks the server for its Redis server's CPU seconds so far; false when it has none.
func redisCPU(ctx context.Context, c *http.Client, base string) (float64, bool) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_bench/redis", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return x, err == nil
}

// frameworksServed reports whether the server serves the framework adapters' variants
// (bench/frameworks answers GET /_bench/frameworks).
func frameworksServed(ctx context.Context, c *http.Client, base string) bool {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_bench/frameworks", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// postmasterPID asks the server for its PostgreSQL postmaster's process id; 0 (no database CPU
// column) when the database is not on this machine.
func postmasterPID(ctx context.Context, c *http.Client, base string) int {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_bench/postmaster", nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
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

// target is a ratio's goal: at least (or, with atMost, at most) bound, checked at the levels in
// at (every level when empty).
type target struct {
	bound  float64
	atMost bool
	at     []int
}

func (t *target) String() string {
	if t == nil {
		return "—"
	}
	op := "≥"
	if t.atMost {
		op = "≤"
	}
	s := fmt.Sprintf("%s %g", op, t.bound)
	if len(t.at) > 0 {
		var l []string
		for _, c := range t.at {
			l = append(l, strconv.Itoa(c))
		}
		s += " at c=" + strings.Join(l, ",")
	}
	return s
}

// verdict marks x against t at level c: "" when t does not apply there.
func (t *target) verdict(c int, x float64) string {
	if t == nil || (len(t.at) > 0 && !slices.Contains(t.at, c)) {
		return ""
	}
	if (t.atMost && x <= t.bound) || (!t.atMost && x >= t.bound) {
		return " ✓"
	}
	return " ✗"
}

func printTable(w io.Writer, selected []variant, levels []int, results map[string]map[int][]sample, rounds int, d time.Duration) {
	fmt.Fprintf(w, "### HTTP end to end (%d rounds × %s per variant and concurrency; medians over rounds)\n\n", rounds, d)
	fmt.Fprintln(w, "| variant | conc | req/s | p50 ms | p99 ms | server CPU µs/req | PostgreSQL CPU µs/req | Redis CPU µs/req | client CPU µs/req | DB round trips/req | WAL B/req | statuses (last round) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, v := range selected {
		for _, c := range levels {
			ss := results[v.name][c]
			if len(ss) == 0 {
				continue
			}
			var rps, p50, p99, cpu, db, rd, cli, rt, wal []float64
			for _, s := range ss {
				rd = append(rd, s.rdCPUUS)
				rps = append(rps, s.rps)
				p50 = append(p50, float64(s.p50.Microseconds())/1000)
				p99 = append(p99, float64(s.p99.Microseconds())/1000)
				cpu = append(cpu, s.cpuUS)
				db = append(db, s.dbCPUUS)
				cli = append(cli, s.cliCPUUS)
				rt = append(rt, s.rt)
				wal = append(wal, s.walB)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %s |\n", v.name, c, median(rps), median(p50), median(p99), median(cpu), median(db), median(rd), median(cli), median(rt), median(wal), statusString(ss[len(ss)-1].statuses))
		}
	}
	ratio := func(num, den string, c int, f func(sample) float64) (float64, bool) {
		var rs []float64
		a, b := results[num][c], results[den][c]
		for i := range min(len(a), len(b)) {
			if d := f(b[i]); d > 0 {
				rs = append(rs, f(a[i])/d)
			}
		}
		return median(rs), len(rs) > 0
	}
	rps := func(s sample) float64 { return s.rps }
	cpu := func(s sample) float64 { return s.cpuUS }
	db := func(s sample) float64 { return s.dbCPUUS }
	both := func(s sample) float64 { return s.cpuUS + s.dbCPUUS }
	walB := func(s sample) float64 { return s.walB }
	all := func(s sample) float64 { return s.cpuUS + s.dbCPUUS + s.rdCPUUS }
	fmt.Fprintf(w, "\n### Ratios (median of per-round ratios; ✓/✗ against the issue's target)\n\n")
	fmt.Fprintln(w, "| ratio | target | "+joinLevels(levels)+" |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---:|", len(levels)))
	rows := []struct {
		label    string
		target   *target
		num, den string
		f        func(sample) float64
	}{
		{"atomic new key / plain transaction (req/s)", &target{bound: 0.6, at: []int{8, 32}}, vAtomicNew, vPlain, rps},
		{"atomic new key / hand-written new key (req/s)", &target{bound: 1.3}, vAtomicNew, vHandNew, rps},
		{"replay / plain transaction (req/s)", &target{bound: 1.3}, vReplay, vPlain, rps},
		{"replay / hand-written replay (req/s)", &target{bound: 1.3}, vReplay, vHandReplay, rps},
		{"atomic new key / plain transaction (server CPU per request)", &target{bound: 2, atMost: true}, vAtomicNew, vPlain, cpu},
		{"issue 19: same handler code, new key / plain (req/s)", &target{bound: 0.75, at: []int{32}}, vStmtNew, vPlain, rps},
		{"issue 19: same handler code, new key / plain (server + PostgreSQL CPU per request)", &target{bound: 1.3, atMost: true, at: []int{32}}, vStmtNew, vPlain, both},
		{"issue 19: same handler code, new key / plain (WAL bytes per request)", &target{bound: 2, atMost: true, at: []int{32}}, vStmtNew, vPlain, walB},
		{"issue 19, partitioned table: new key / plain (req/s)", &target{bound: 0.75, at: []int{32}}, vPartNew, vPlain, rps},
		{"issue 19, partitioned table: new key / plain (server + PostgreSQL CPU per request)", &target{bound: 1.3, atMost: true, at: []int{32}}, vPartNew, vPlain, both},
		{"issue 19, partitioned table: new key / plain (WAL bytes per request)", &target{bound: 2, atMost: true, at: []int{32}}, vPartNew, vPlain, walB},
		{"partitioned / plain table, replay (req/s)", nil, vPartReplay, vStmtReplay, rps},
		{"partitioned / plain table, replay (server + PostgreSQL CPU per request)", nil, vPartReplay, vStmtReplay, both},
		{"atomic new key / plain transaction (PostgreSQL CPU per request)", nil, vAtomicNew, vPlain, db},
		{"atomic new key / plain transaction (server + PostgreSQL CPU per request)", nil, vAtomicNew, vPlain, both},
		{"replay / hand-written replay (server CPU per request)", nil, vReplay, vHandReplay, cpu},
		{"replay / hand-written replay (server + PostgreSQL CPU per request)", nil, vReplay, vHandReplay, both},
		{"same handler code: idemgen new key / plain transaction (req/s)", &target{bound: 0.6, at: []int{8, 32}}, vStmtNew, vPlain, rps},
		{"same handler code: idemgen new key / hand-written new key (req/s)", &target{bound: 1.3}, vStmtNew, vHandNew, rps},
		{"same handler code: idemgen replay / hand-written replay (req/s)", &target{bound: 1.3}, vStmtReplay, vHandReplay, rps},
		{"same handler code: idemgen new key / plain transaction (server CPU per request)", &target{bound: 2, atMost: true}, vStmtNew, vPlain, cpu},
		{"lease new key / plain transaction (req/s)", nil, vLeaseNew, vPlain, rps},
		{"A/B new key: WithStatement / ReadFirst (req/s)", nil, vStmtNew, vReadFirstNew, rps},
		{"A/B new key: WithStatement / Pipelined (req/s)", nil, vStmtNew, vPipeNew, rps},
		{"A/B new key: WithStatement / ReadFirst (server + PostgreSQL CPU per request)", nil, vStmtNew, vReadFirstNew, both},
		{"A/B new key: WithStatement / Pipelined (server + PostgreSQL CPU per request)", nil, vStmtNew, vPipeNew, both},
		{"A/B replay: WithStatement / ReadFirst (req/s)", nil, vStmtReplay, vReadFirstRep, rps},
		{"A/B replay: WithStatement / ReadFirst (server + PostgreSQL CPU per request)", nil, vStmtReplay, vReadFirstRep, both},
		{"A/B replay: WithStatement / Pipelined (req/s)", nil, vStmtReplay, vPipeReplay, rps},
		{"A/B replay: WithStatement / Pipelined (server + PostgreSQL CPU per request)", nil, vStmtReplay, vPipeReplay, both},
		{"middleware / generated handler, new key (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vMwNew, vStmtNew, rps},
		{"middleware / generated handler, replay (req/s)", &target{bound: 0.95, at: []int{8, 32}}, vMwReplay, vStmtReplay, rps},
		{"middleware / generated handler, new key (server + PostgreSQL CPU per request)", nil, vMwNew, vStmtNew, both},
		{"middleware with LockAtRead / generated handler, new key (req/s)", nil, vMwLockNew, vStmtNew, rps},
		{"middleware with LockAtRead / generated handler, replay (req/s)", nil, vMwLockReplay, vStmtReplay, rps},
		{"middleware with LockAtRead / generated handler, new key (server + PostgreSQL CPU per request)", nil, vMwLockNew, vStmtNew, both},
		{"middleware / generated handler, replay (server + PostgreSQL CPU per request)", nil, vMwReplay, vStmtReplay, both},
		{"echo adapter / middleware, new key (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vEchoNew, vMwNew, rps},
		{"echo adapter / middleware, replay (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vEchoReplay, vMwReplay, rps},
		{"gin adapter / middleware, new key (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vGinNew, vMwNew, rps},
		{"gin adapter / middleware, replay (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vGinReplay, vMwReplay, rps},
		{"fiber adapter / generated handler, new key (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vFiberNew, vStmtNew, rps},
		{"fiber adapter / generated handler, replay (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vFiberReplay, vStmtReplay, rps},
		{"huma adapter / generated handler, new key (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vHumaNew, vStmtNew, rps},
		{"huma adapter / generated handler, replay (req/s)", &target{bound: 0.9, at: []int{8, 32}}, vHumaReplay, vStmtReplay, rps},
		{"huma adapter / middleware, new key (req/s)", nil, vHumaNew, vMwNew, rps},
		{"huma adapter / middleware, replay (req/s)", nil, vHumaReplay, vMwReplay, rps},
		{"fiber adapter / middleware, new key (req/s)", nil, vFiberNew, vMwNew, rps},
		{"fiber adapter / middleware, replay (req/s)", nil, vFiberReplay, vMwReplay, rps},
		{"echo adapter / middleware, new key (server CPU per request)", nil, vEchoNew, vMwNew, cpu},
		{"echo adapter / middleware, replay (server CPU per request)", nil, vEchoReplay, vMwReplay, cpu},
		{"gin adapter / middleware, new key (server CPU per request)", nil, vGinNew, vMwNew, cpu},
		{"gin adapter / middleware, replay (server CPU per request)", nil, vGinReplay, vMwReplay, cpu},
		{"fiber adapter / generated handler, new key (server CPU per request)", nil, vFiberNew, vStmtNew, cpu},
		{"fiber adapter / generated handler, replay (server CPU per request)", nil, vFiberReplay, vStmtReplay, cpu},
		{"huma adapter / generated handler, new key (server CPU per request)", nil, vHumaNew, vStmtNew, cpu},
		{"huma adapter / generated handler, replay (server CPU per request)", nil, vHumaReplay, vStmtReplay, cpu},
		{"replay via Redis cache / replay via PostgreSQL (req/s)", &target{bound: 1.5}, vCacheReplay, vReplay, rps},
		{"replay via Redis cache + in-process tier / replay via PostgreSQL (req/s)", nil, vLocalReplay, vReplay, rps},
		{"replay via Redis cache + in-process tier / bare handler (req/s)", &target{bound: 0.5}, vLocalReplay, vBare, rps},
		{"replay via Redis cache / replay via PostgreSQL (server + PostgreSQL + Redis CPU per request)", nil, vCacheReplay, vReplay, all},
		{"replay via Redis cache + in-process tier / replay via PostgreSQL (server + PostgreSQL + Redis CPU per request)", nil, vLocalReplay, vReplay, all},
		{"retry storm: Redis cache / PostgreSQL (req/s)", &target{bound: 1.5}, vStormCache, vStormPG, rps},
		{"retry storm: Redis cache + in-process tier / PostgreSQL (req/s)", nil, vStormLocal, vStormPG, rps},
		{"retry storm: Redis cache + in-process tier / bare handler (req/s)", &target{bound: 0.5}, vStormLocal, vBare, rps},
		{"atomic new key: via Redis cache / PostgreSQL alone (req/s)", nil, vCacheNew, vAtomicNew, rps},
		{"lease new key: Redis paired with PostgreSQL / PostgreSQL (req/s)", nil, vRedisLease, vLeaseNew, rps},
		{"lease new key: Redis paired with PostgreSQL / PostgreSQL (server + PostgreSQL + Redis CPU per request)", nil, vRedisLease, vLeaseNew, all},
		{"lease new key: Redis paired with PostgreSQL / PostgreSQL (PostgreSQL CPU per request)", nil, vRedisLease, vLeaseNew, db},
	}
	for _, row := range rows {
		var cells []string
		any := false
		for _, c := range levels {
			x, ok := ratio(row.num, row.den, c, row.f)
			if !ok {
				cells = append(cells, " — |")
				continue
			}
			any = true
			cells = append(cells, fmt.Sprintf(" %.2f%s |", x, row.target.verdict(c, x)))
		}
		if any {
			fmt.Fprintf(w, "| %s | %s |%s\n", row.label, row.target, strings.Join(cells, ""))
		}
	}
}

func stormReport(ctx context.Context, w io.Writer, base string, n int) {
	run := fmt.Sprintf("storm-%d", time.Now().UnixNano())
	c := load.NewClient(n)
	storm := func(tenant, key string) load.Request {
		req := load.Request{Method: "POST", URL: base + "/v1/payments", Header: headers(tenant, key), Body: []byte(paymentBody)}
		req.Header.Set("X-Test-Delay", "200ms")
		return req
	}
	// Two storms on other keys first, so that the measured one meets open client connections and
	// a grown connection pool, as a storm on a running service would, rather than their set-up.
	for i := range 2 {
		_, _, _ = load.Once(ctx, c, n, storm("bench-"+run+"-warm-up", fmt.Sprintf("key-%s-warm-up-%d", run, i)))
	}
	labels, lat, err := load.Once(ctx, c, n, storm("bench-"+run, "key-"+run+"-0000000000"))
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
	fmt.Fprintf(w, "\n### Same-key storm: %d concurrent copies of one createPayment (handler sleeps 200 ms; after two warm-up storms on other keys)\n\n", n)
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
