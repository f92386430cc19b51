package main

// A/B mode (-old-url): the same variants driven against two benchservers, one built from another
// revision (bench/ab/run.sh builds it in a temporary git worktree), on the same PostgreSQL in
// separate databases. In every round, every variant at every concurrency is measured on both
// servers back to back, the order of the two alternating, so that each pair of measurements
// shares the machine's load of the moment; the ratios new/old are taken per pair, and their
// median, range and a sign test over the rounds say whether the difference is above the noise.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/bench/internal/load"
)

// abDefault is the variants measured in A/B mode unless -only names others: a new key in atomic
// mode, a replay, a new key in lease mode (routes that benchservers built from older commits
// serve too, so that an A/B run can measure both sides).
const abDefault = `^idemgen (atomic, new key|replay|lease, new key)$`

// abServer is one side of an A/B run.
type abServer struct {
	name       string
	base       string
	pid        int
	postmaster int
}

// abPair is one round's measurement of one variant at one concurrency on both servers.
type abPair struct {
	old, new sample
	load     float64 // the machine's 1-minute load average just before the pair
}

type abKey struct {
	variant string
	conc    int
}

// abResults is an A/B run's (or a pool of runs') measurements.
type abResults struct {
	oldName, newName string
	rounds           int // rounds per run (for the header); 0 when pooled
	runs             int
	duration         time.Duration
	pairs            map[abKey][]abPair
}

func runAB(ctx context.Context, c *http.Client, wrk string, old, new abServer, only string, levels []int, rounds int, d time.Duration, samples string) {
	if only == "" {
		only = abDefault
	}
	re, err := regexp.Compile(only)
	if err != nil {
		fatalf("bad -only: %v", err)
	}
	var selected []variant
	for _, v := range variants {
		if re.MatchString(v.name) && !v.redis {
			selected = append(selected, v)
		}
	}
	// A variant whose route one of the revisions lacks (the middleware's /mw/ before it existed)
	// would measure that side's 404s: it is left out, and said so.
	served := selected[:0]
	for _, v := range selected {
		if status, ok := serves(ctx, c, old.base, v); !ok {
			fmt.Fprintf(os.Stderr, "benchdrive: %q left out: %s answers %s on POST %s\n", v.name, old.name, status, v.path)
		} else if status, ok := serves(ctx, c, new.base, v); !ok {
			fmt.Fprintf(os.Stderr, "benchdrive: %q left out: %s answers %s on POST %s\n", v.name, new.name, status, v.path)
		} else {
			served = append(served, v)
		}
	}
	selected = served
	if len(selected) == 0 {
		fatalf("-only %q names no variant both servers serve", only)
	}
	old.postmaster = postmasterPID(ctx, c, old.base)
	new.postmaster = postmasterPID(ctx, c, new.base)
	res := abResults{oldName: old.name, newName: new.name, rounds: rounds, runs: 1, duration: d, pairs: map[abKey][]abPair{}}
	var tsv *os.File
	if samples != "" {
		if tsv, err = os.OpenFile(samples, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			fatalf("samples: %v", err)
		}
		defer tsv.Close()
	}
	runID := strconv.FormatInt(time.Now().Unix(), 10)
	for r := 0; r < rounds; r++ {
		for _, conc := range levels {
			for i := range selected {
				v := selected[(i+r)%len(selected)]
				if !v.runsAt(conc, levels) {
					continue
				}
				p := abPair{load: loadAvg()}
				sides := []struct {
					srv abServer
					out *sample
				}{{old, &p.old}, {new, &p.new}}
				if (r+i)%2 == 1 {
					sides[0], sides[1] = sides[1], sides[0]
				}
				for _, s := range sides {
					run := fmt.Sprintf("r%dc%d-%d", r, conc, time.Now().UnixNano())
					if !v.fresh {
						prime(ctx, c, s.srv.base, v, run)
					}
					m, err := measure(ctx, c, wrk, s.srv.base, s.srv.pid, s.srv.postmaster, conc, d, v, run)
					if err != nil {
						fatalf("%s on %s at concurrency %d: %v", v.name, s.srv.name, conc, err)
					}
					*s.out = m
				}
				k := abKey{v.name, conc}
				res.pairs[k] = append(res.pairs[k], p)
				if tsv != nil {
					writeSample(tsv, runID, r, old.name, new.name, k, p)
				}
			}
		}
	}
	printAB(os.Stdout, res, selected, levels)
}

// serves sends one request of v to the server at base, with a key and tenant of its own, and
// reports its status and whether the server has the route (anything but 404 and 405).
func serves(ctx context.Context, c *http.Client, base string, v variant) (string, bool) {
	labels, _, err := load.Once(ctx, c, 1, v.builder(base, fmt.Sprintf("probe-%d", time.Now().UnixNano()))(0))
	if err != nil || len(labels) != 1 {
		fatalf("probing %s on %s: %v %v", v.name, base, labels, err)
	}
	return labels[0], labels[0] != "404" && labels[0] != "405"
}

// loadAvg is the machine's 1-minute load average (0 when unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// The samples file (-samples) has one line per pair, so that several runs can be pooled
// (-pool): run, round, old name, new name, variant, concurrency, load, then for old and new:
// req/s, p50 µs, p99 µs, server, PostgreSQL and client CPU µs per request, round trips per
// request; then the server's allocations per request (objects, KiB), old then new.
func writeSample(w io.Writer, run string, round int, oldName, newName string, k abKey, p abPair) {
	f := func(s sample) string {
		return fmt.Sprintf("%.1f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.3f", s.rps, s.p50.Microseconds(), s.p99.Microseconds(), s.cpuUS, s.dbCPUUS, s.cliCPUUS, s.rt)
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\t%.2f\t%s\t%s\t%.2f\t%.3f\t%.2f\t%.3f\n", run, round, oldName, newName, k.variant, k.conc, p.load,
		f(p.old), f(p.new), p.old.allocs, p.old.allocKB, p.new.allocs, p.new.allocKB)
}

// poolAB reads samples files written by -samples and prints the A/B tables over all their rounds.
func poolAB(files []string) {
	res := abResults{pairs: map[abKey][]abPair{}}
	runs := map[string]bool{}
	var names, newNames []string
	var levels []int
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			fatalf("pool: %v", err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			f := strings.Split(sc.Text(), "\t")
			if len(f) != 7+2*7 && len(f) != 7+2*7+4 {
				fatalf("pool: %s: malformed line %q", name, sc.Text())
			}
			// The old side must be one revision; the new side may carry several names (the
			// same code measured from commits that changed only the harness): they are listed.
			if res.oldName == "" {
				res.oldName = f[2]
			} else if res.oldName != f[2] {
				fatalf("pool: %s: against %s, not %s", name, f[2], res.oldName)
			}
			if !slices.Contains(newNames, f[3]) {
				newNames = append(newNames, f[3])
			}
			runs[name+"/"+f[0]] = true
			conc, _ := strconv.Atoi(f[5])
			k := abKey{f[4], conc}
			if !slices.Contains(names, k.variant) {
				names = append(names, k.variant)
			}
			if !slices.Contains(levels, conc) {
				levels = append(levels, conc)
			}
			p := abPair{old: parseSample(f[7:14]), new: parseSample(f[14:21])}
			p.load, _ = strconv.ParseFloat(f[6], 64)
			if len(f) > 21 {
				p.old.allocs, _ = strconv.ParseFloat(f[21], 64)
				p.old.allocKB, _ = strconv.ParseFloat(f[22], 64)
				p.new.allocs, _ = strconv.ParseFloat(f[23], 64)
				p.new.allocKB, _ = strconv.ParseFloat(f[24], 64)
			}
			res.pairs[k] = append(res.pairs[k], p)
		}
		fh.Close()
	}
	res.runs = len(runs)
	res.newName = strings.Join(newNames, " = ")
	slices.Sort(levels)
	var selected []variant
	for _, v := range variants {
		if slices.Contains(names, v.name) {
			selected = append(selected, v)
		}
	}
	printAB(os.Stdout, res, selected, levels)
}

func parseSample(f []string) sample {
	x := make([]float64, len(f))
	for i, s := range f {
		x[i], _ = strconv.ParseFloat(s, 64)
	}
	return sample{rps: x[0], p50: time.Duration(x[1]) * time.Microsecond, p99: time.Duration(x[2]) * time.Microsecond,
		cpuUS: x[3], dbCPUUS: x[4], cliCPUUS: x[5], rt: x[6]}
}

// signTest is the two-sided sign test's p-value for k successes out of n (ties dropped
// beforehand): how likely a split at least this uneven is when neither side is better.
func signTest(k, n int) float64 {
	if n == 0 {
		return 1
	}
	m := min(k, n-k)
	var tail float64
	for i := 0; i <= m; i++ {
		tail += binom(n, i)
	}
	return math.Min(1, 2*tail/math.Pow(2, float64(n)))
}

func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// abRatio is the per-pair ratios new/old of one figure: median, range, and how many pairs
// favour the new side (lowerBetter: a smaller figure is better).
type abRatio struct {
	med, lo, hi float64
	ahead, n    int
}

func ratios(ps []abPair, f func(sample) float64, lowerBetter bool) (abRatio, bool) {
	var rs []float64
	r := abRatio{}
	for _, p := range ps {
		o, n := f(p.old), f(p.new)
		if o <= 0 {
			continue
		}
		x := n / o
		rs = append(rs, x)
		if x == 1 {
			continue
		}
		r.n++
		if (x < 1) == lowerBetter {
			r.ahead++
		}
	}
	if len(rs) == 0 {
		return r, false
	}
	r.med, r.lo, r.hi = median(rs), slices.Min(rs), slices.Max(rs)
	return r, true
}

func (r abRatio) String() string {
	return fmt.Sprintf("%.2f (%.2f–%.2f)", r.med, r.lo, r.hi)
}

// noiseP is the significance level below which a sign test calls a difference real.
const noiseP = 0.05

func printAB(w io.Writer, res abResults, selected []variant, levels []int) {
	var loads []float64
	for _, ps := range res.pairs {
		for _, p := range ps {
			if p.load > 0 {
				loads = append(loads, p.load)
			}
		}
	}
	if res.rounds == 0 {
		fmt.Fprintf(w, "### A/B: %s against %s (%d run(s) pooled from samples files; each pair measured back to back, order alternating; medians over rounds)\n\n", res.newName, res.oldName, res.runs)
	} else {
		fmt.Fprintf(w, "### A/B: %s against %s (%d rounds × %s per variant, concurrency and revision; each pair measured back to back, order alternating; medians over rounds)\n\n", res.newName, res.oldName, res.rounds, res.duration)
	}
	if len(loads) > 0 {
		fmt.Fprintf(w, "Load average (1 min) before each pair: median %.1f, range %.1f–%.1f, on %d cores.\n\n", median(loads), slices.Min(loads), slices.Max(loads), goruntime.NumCPU())
	}
	fmt.Fprintln(w, "| variant | conc | revision | req/s | p50 ms | p99 ms | server CPU µs/req | PostgreSQL CPU µs/req | client CPU µs/req | DB round trips/req | server allocs/req | server KiB/req | statuses (last round) |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, v := range selected {
		for _, c := range levels {
			ps := res.pairs[abKey{v.name, c}]
			if len(ps) == 0 {
				continue
			}
			for _, side := range []struct {
				name string
				get  func(abPair) sample
			}{{res.oldName, func(p abPair) sample { return p.old }}, {res.newName, func(p abPair) sample { return p.new }}} {
				var rps, p50, p99, cpu, db, cli, rt, al, kb []float64
				for _, p := range ps {
					s := side.get(p)
					rps = append(rps, s.rps)
					p50 = append(p50, float64(s.p50.Microseconds())/1000)
					p99 = append(p99, float64(s.p99.Microseconds())/1000)
					cpu = append(cpu, s.cpuUS)
					db = append(db, s.dbCPUUS)
					cli = append(cli, s.cliCPUUS)
					rt = append(rt, s.rt)
					al = append(al, s.allocs)
					kb = append(kb, s.allocKB)
				}
				fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.2f | %s | %s | %s |\n", v.name, c, side.name,
					median(rps), median(p50), median(p99), median(cpu), median(db), median(cli), median(rt),
					orDash(median(al), "%.0f"), orDash(median(kb), "%.1f"), statusString(side.get(ps[len(ps)-1]).statuses))
			}
		}
	}
	fmt.Fprintf(w, "\n### A/B ratios %s / %s (median of the per-round ratios, range in brackets; the sign test counts the rounds in which %s was ahead)\n\n", res.newName, res.oldName, res.newName)
	fmt.Fprintln(w, "| variant | conc | req/s | p99 | server CPU/req | PostgreSQL CPU/req | server + PostgreSQL CPU/req | round trips/req | server allocs/req | ahead on req/s; on CPU | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
	rps := func(s sample) float64 { return s.rps }
	p99 := func(s sample) float64 { return float64(s.p99) }
	cpu := func(s sample) float64 { return s.cpuUS }
	db := func(s sample) float64 { return s.dbCPUUS }
	both := func(s sample) float64 { return s.cpuUS + s.dbCPUUS }
	rt := func(s sample) float64 { return s.rt }
	for _, v := range selected {
		for _, c := range levels {
			ps := res.pairs[abKey{v.name, c}]
			if len(ps) == 0 {
				continue
			}
			rr, _ := ratios(ps, rps, false)
			rp, _ := ratios(ps, p99, true)
			rc, _ := ratios(ps, cpu, true)
			rd, okd := ratios(ps, db, true)
			rb, _ := ratios(ps, both, true)
			rtr, okt := ratios(ps, rt, true)
			ra, oka := ratios(ps, func(s sample) float64 { return s.allocs }, true)
			dbCell, rtCell, alCell := "—", "—", "—"
			if oka {
				alCell = fmt.Sprintf("%.2f", ra.med)
			}
			if okd {
				dbCell = rd.String()
			}
			if okt {
				rtCell = fmt.Sprintf("%.2f", rtr.med)
			}
			pr, pc := signTest(rr.ahead, rr.n), signTest(rb.ahead, rb.n)
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d/%d (p=%.2f); %d/%d (p=%.2f) | %s |\n", v.name, c,
				rr, rp, rc, dbCell, rb, rtCell, alCell, rr.ahead, rr.n, pr, rb.ahead, rb.n, pc, verdict(rr, pr, rb, pc))
		}
	}
	fmt.Fprintf(w, "\nVerdict: \"within noise\" when neither req/s nor server + PostgreSQL CPU per request differs in a sign test over the rounds at p < %.2f; otherwise which side is ahead, by the median ratio.\n", noiseP)
}

func verdict(rr abRatio, pr float64, rb abRatio, pc float64) string {
	if signTest(0, max(rr.n, rb.n)) >= noiseP {
		return "too few rounds to tell"
	}
	var out []string
	if pr < noiseP {
		if rr.med < 1 {
			out = append(out, fmt.Sprintf("slower: req/s ×%.2f", rr.med))
		} else {
			out = append(out, fmt.Sprintf("faster: req/s ×%.2f", rr.med))
		}
	}
	if pc < noiseP {
		if rb.med > 1 {
			out = append(out, fmt.Sprintf("more CPU: ×%.2f", rb.med))
		} else {
			out = append(out, fmt.Sprintf("less CPU: ×%.2f", rb.med))
		}
	}
	if len(out) == 0 {
		return "within noise"
	}
	return strings.Join(out, "; ")
}

// orDash formats x, or "—" when it is 0 (not measured).
func orDash(x float64, format string) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf(format, x)
}
