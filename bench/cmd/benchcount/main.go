// Command benchcount measures what one request costs the server in counts the machine's load
// cannot move (bench/internal/reqcost): allocations, statements and round trips per request for
// a replay, a mismatch and a new key through the generated handler and the middleware, and the
// plain-transaction and bare controls; and, with -loop, runs one scenario's requests between two
// marks for callgrind, or under a CPU or allocation profile. It connects with DATABASE_URL.
//
//	scripts/with-postgres.sh go run ./bench/cmd/benchcount                  # the counts table
//	scripts/with-postgres.sh go run ./bench/cmd/benchcount -loop 'generated handler, replay' \
//	    -n 20000 -cpuprofile replay.pprof -memprofile replay-allocs.pprof    # profiles
//	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --dump-before='*reqcost.Mark' \
//	    bench/out/benchcount -loop 'generated handler, replay' -n 200       # instructions
//
// bench/instructions.sh runs the last one and prints instructions per request, by stage.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/bench/internal/reqcost"
)

func main() {
	loop := flag.String("loop", "", "run only this scenario (\"PATH, KIND\", e.g. \"generated handler, replay\") between two calls of reqcost.Mark")
	n := flag.Int("n", 200, "requests measured per batch (with -loop: in all)")
	batches := flag.Int("batches", 5, "batches measured per scenario")
	warm := flag.Int("warm", 100, "requests sent before measuring")
	cpuprofile := flag.String("cpuprofile", "", "with -loop: write a CPU profile of the measured requests to this file")
	memprofile := flag.String("memprofile", "", "with -loop: write an allocation profile (every allocation sampled) of the measured requests to this file")
	direct := flag.Bool("direct", false, "with -loop: call the path's handler in the loop's goroutine (no net/http server, no client), so that callgrind can tell the stages apart")
	cgReport := flag.String("callgrind", "", "print instructions per request by stage from this callgrind dump of -n requests, and exit")
	work := flag.String("work", "", "print the instructions per request of this callgrind dump of -n requests, the scheduler's excluded (bench/README.md, \"Request-cost guard\"), and exit")
	stageList := flag.Bool("stages", false, "print the stages' names and pprof focus and ignore expressions (tab-separated), and exit")
	flag.Parse()
	if *work != "" {
		v, err := workPerRequest(*work, *n)
		if err != nil {
			log.Fatalf("benchcount: %v", err)
		}
		fmt.Printf("%.0f\n", v)
		return
	}
	if *stageList {
		printStages(os.Stdout)
		return
	}
	if *cgReport != "" {
		if err := report(os.Stdout, *cgReport, *n); err != nil {
			log.Fatalf("benchcount: %v", err)
		}
		return
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		log.Fatal("benchcount: DATABASE_URL is not set (run under scripts/with-postgres.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rig, err := reqcost.New(ctx, url)
	if err != nil {
		log.Fatalf("benchcount: %v", err)
	}
	defer rig.Close()
	if *loop != "" {
		if err := runLoop(rig, *loop, *warm, *n, *direct, *cpuprofile, *memprofile); err != nil {
			log.Fatalf("benchcount: %v", err)
		}
		return
	}
	fmt.Printf("Per request, the least over %d batches of %d (the mean in brackets):\n\n", *batches, *n)
	fmt.Printf("| scenario | allocs/req | bytes/req | statements/req | round trips/req |\n|---|---:|---:|---:|---:|\n")
	for _, s := range append(append(append([]reqcost.Scenario{}, reqcost.Scenarios...), reqcost.Options...), reqcost.Controls...) {
		bs, err := rig.Measure(s, *warm, *batches, *n)
		if err != nil {
			log.Fatalf("benchcount: %s: %v", s, err)
		}
		c, m := reqcost.Min(bs), reqcost.Mean(bs)
		fmt.Printf("| %s | %.1f (%.1f) | %.0f (%.0f) | %.2f (%.2f) | %.2f (%.2f) |\n", s, c.Allocs, m.Allocs, c.Bytes, m.Bytes, c.Statements, m.Statements, c.RoundTrips, m.RoundTrips)
	}
}

func runLoop(rig *reqcost.Rig, name string, warm, n int, direct bool, cpuprofile, memprofile string) error {
	s, err := scenario(name)
	if err != nil {
		return err
	}
	if memprofile != "" {
		// Every allocation: the profile then counts objects exactly, not by sampling.
		old := setMemProfileRate(1)
		defer setMemProfileRate(old)
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		// 1,000 samples a second rather than pprof's 100: a loop of a few seconds then has
		// enough. Set first, StartCPUProfile keeps it (and prints that it could not set its own).
		runtime.SetCPUProfileRate(1000)
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	if err := rig.Loop(s, warm, n, direct); err != nil {
		return err
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	us := func(a, b syscall.Timeval) float64 {
		return float64((b.Sec-a.Sec)*1e6+(b.Usec-a.Usec)) / float64(n+warm)
	}
	fmt.Fprintf(os.Stderr, "process CPU per request (server and client, under this machine's load): user %.1f µs, system %.1f µs\n", us(r0.Utime, r1.Utime), us(r0.Stime, r1.Stime))
	if memprofile != "" {
		f, err := os.Create(memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.GC() // the profile holds what the last completed collection saw
		return pprof.Lookup("allocs").WriteTo(f, 0)
	}
	return nil
}

// scenario finds the scenario named "PATH, KIND".
func scenario(name string) (reqcost.Scenario, error) {
	var names []string
	for _, s := range append(append(append([]reqcost.Scenario{}, reqcost.Scenarios...), reqcost.Options...), reqcost.Controls...) {
		if strings.EqualFold(s.String(), name) {
			return s, nil
		}
		names = append(names, fmt.Sprintf("%q", s))
	}
	return reqcost.Scenario{}, fmt.Errorf("no scenario %q; there are %s", name, strings.Join(names, ", "))
}
