package main

import (
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/idemgen/idemgen/bench/internal/callgrind"
)

// stage is one step of the request path, as the instructions of the functions that make it.
type stage struct {
	name, what string
	// of is the step's instructions in a profile.
	of func(p *callgrind.Profile) int64
}

func incl(re string) func(p *callgrind.Profile) int64 {
	r := regexp.MustCompile(re)
	return func(p *callgrind.Profile) int64 { return p.Inclusive(r) }
}

// calls is the instructions of the calls from functions matching caller to functions matching
// callee.
func calls(caller, callee string) func(p *callgrind.Profile) int64 {
	rc, re := regexp.MustCompile(caller), regexp.MustCompile(callee)
	return func(p *callgrind.Profile) int64 {
		var n int64
		for e, v := range p.Calls {
			if rc.MatchString(e.Caller) && re.MatchString(e.Callee) {
				n += v
			}
		}
		return n
	}
}

func sum(fs ...func(p *callgrind.Profile) int64) func(p *callgrind.Profile) int64 {
	return func(p *callgrind.Profile) int64 {
		var n int64
		for _, f := range fs {
			n += f(p)
		}
		return n
	}
}

func minus(a, b func(p *callgrind.Profile) int64) func(p *callgrind.Profile) int64 {
	return func(p *callgrind.Profile) int64 { return a(p) - b(p) }
}

// The functions of each stage (runtime/http.go's steps; pgstore's read). A function that blocks
// (the read, waiting for PostgreSQL's answer) includes what the scheduler ran meanwhile on the
// one processor: only the scheduler, as the client waits too.
const (
	rtPkg = `github\.com/idemgen/idemgen/runtime\.`
	pgPkg = `github\.com/idemgen/idemgen/runtime/pgstore\.`
)

var (
	fingerprintHash = incl(`canonical\.\(\*Framer\)\.Sum$`)
	logStage        = incl(rtPkg + `\(\*Runtime\)\.logResult$`)
	outcomeStage    = sum(calls(rtPkg+`\(\*Runtime\)\.finish$`, `\.Outcome$`), incl(rtPkg+`\(\*exchange\)\.executed$`))
	stages          = []stage{
		{"admit", "scope, body read, media type (exchange.admit)", incl(rtPkg + `\(\*exchange\)\.admit$`)},
		{"decode", "the generated decoder and the canonical form (decodeRequest, less the hash)", minus(incl(rtPkg+`decodeRequest\[.*\]$`), fingerprintHash)},
		{"fingerprint", "SHA-256 of the framed canonical form (canonical.Framer.Sum)", fingerprintHash},
		{"key", "key rules and normal form (exchange.resolveKey)", incl(rtPkg + `\(\*exchange\)\.resolveKey$`)},
		{"lookup: digests", "the record's scope and key digests, SHA-256 (pgstore spec)", incl(pgPkg + `\(\*Store\)\.spec$`)},
		{"lookup: deadline", "the store call's StoreTimeout context and its cancel", sum(calls(rtPkg+`\(\*exchange\)\.storeCall$`, `^context\.WithTimeout$`), calls(rtPkg+`\(\*exchange\)\.storeCall$`, `^context\.WithDeadlineCause\.func`))},
		{"lookup: pool", "acquire and release a pooled connection", sum(incl(`pgxpool\.\(\*Pool\)\.Acquire$`), incl(`pgxpool\.\(\*Conn\)\.Release$`))},
		{"lookup: read", "the SELECT through pgx, its answer awaited and scanned (pgstore read)", incl(pgPkg + `\(\*Store\)\.(read|readProbe|readLimited)$`)},
		{"decide", "the verdict on the record (exchange.meet, decide)", incl(rtPkg + `\(\*exchange\)\.meet$`)},
		{"answer", "the reply that the verdict gets (answer)", incl(rtPkg + `answer$`)},
		{"log", "the log line, when the answer has one (Runtime.logResult)", logStage},
		{"trace", "spans started and ended (no provider set: none started)", sum(incl(rtPkg+`\(\*globalTracer\)\.Start$`), incl(rtPkg+`endSpan$`), calls(rtPkg+`serveRouted$`, `\.(End|IsRecording)$`))},
		{"metrics", "the Observer's outcome and claim latency, and their clock reads", sum(outcomeStage, calls(rtPkg+`\(\*exchange\)\.storeCall$`, `(\.ClaimLatency|^time\.(Now|Since))$`))},
		{"slots", "handler slots (a new key)", incl(pgPkg + `\(\*(Store|handlerSlots)\)\.(trySlot|slotFor|freeSlot|waitSlot|acquireTx)$`)},
		{"write", "the stored headers and body, or the problem, written (Runtime.finish less log and metrics)", minus(incl(rtPkg+`\(\*Runtime\)\.finish$`), sum(logStage, outcomeStage))},
	}
	runtimeEntry = incl(rtPkg + `serveRouted$`)
)

// report prints instructions per request by stage from a callgrind dump of n requests.
func report(w io.Writer, path string, n int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := callgrind.Read(f)
	if err != nil {
		return err
	}
	per := func(v int64) string { return fmt.Sprintf("%.0f", float64(v)/float64(n)) }
	fmt.Fprintf(w, "| stage | what runs | instructions/request |\n|---|---|---:|\n")
	var staged int64
	for _, s := range stages {
		v := s.of(p)
		staged += v
		fmt.Fprintf(w, "| %s | %s | %s |\n", s.name, s.what, per(v))
	}
	rt := runtimeEntry(p)
	fmt.Fprintf(w, "| runtime, the rest | the exchange, closures, contexts, routing glue (serveRouted less the stages) | %s |\n", per(rt-staged))
	fmt.Fprintf(w, "| outside the runtime | net/http's server, the harness's handler wrapper and client, the scheduler between requests | %s |\n", per(p.Total-rt))
	fmt.Fprintf(w, "| **total** | | **%s** |\n", per(p.Total))
	return nil
}
