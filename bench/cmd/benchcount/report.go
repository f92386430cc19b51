package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"

	"github.com/idemgen/idemgen/bench/internal/callgrind"
)

// stage is one step of the request path (runtime/http.go's steps, pgstore's read).
//
// Its instructions are those of its own functions (own: each function belongs to the first
// stage whose expression matches it) and of the library calls only it makes (calls: edges from
// a caller to a callee, each with everything the callee ran). callgrind cannot follow Go's
// goroutine switches (a goroutine that parks leaves frames on its shadow stack), so what it
// counts for a call that contains a switch is not that call's; own instructions are exact, and so
// are calls that never park (SHA-256, making a context, taking an idle pooled connection). The
// allocator's and the maps' instructions, net/http's and the scheduler's are the last row's.
//
// Its allocations and CPU share come from pprof profiles, whose stacks are right: everything
// under the functions matching whole, less what runs under those matching ignore.
type stage struct {
	name, what    string
	own           string
	calls         [][2]string
	whole, ignore string
}

const (
	rtPkg = `^github\.com/idemgen/idemgen/runtime\.`
	pgPkg = `^github\.com/idemgen/idemgen/runtime/pgstore\.`
)

var stages = []stage{
	{name: "admit", what: "scope, body read, media type (exchange.admit)",
		own:   rtPkg + `(\(\*exchange\)\.admit|readBody|exactMediaType|matchMediaType|unsupportedCoding|callScope|isJSONMediaType|\(\*Operation\)\.(RequestScope|badScopeHeader|bodyLimit))$`,
		whole: rtPkg + `\(\*exchange\)\.admit$`},
	{name: "fingerprint", what: "SHA-256 of the framed canonical form (canonical.Framer.Sum)",
		own: `canonical\.\(\*Framer\)\.Sum$`, calls: [][2]string{{`canonical\.\(\*Framer\)\.Sum$`, `.`}},
		whole: `canonical\.\(\*Framer\)\.Sum$`},
	{name: "decode", what: "the generated decoder, the checks of the schema, the canonical form (decodeRequest)",
		own:   rtPkg + `(prepare|decodeRequest\[.*\]|decodeFailed|\(\*exchange\)\.(pathValue|pathMatches|template|segments))$|^github\.com/idemgen/idemgen/(runtime/gen|runtime/canonical|golden/conformance)\.`,
		whole: rtPkg + `decodeRequest\[.*\]$`, ignore: `canonical\.\(\*Framer\)\.Sum$`},
	{name: "key", what: "key rules and normal form (exchange.resolveKey)",
		own:   rtPkg + `(\(\*exchange\)\.(resolveKey|checkFirstSent|keyHeader)|checkKey)$|^github\.com/idemgen/idemgen/runtime/defaults\.`,
		whole: rtPkg + `\(\*exchange\)\.resolveKey$`},
	{name: "lookup: digests", what: "the record's scope and key digests, SHA-256 (pgstore's claim spec)",
		own: pgPkg + `(\(\*Store\)\.spec|digest|tenantOf)$|^github\.com/idemgen/idemgen/runtime/store\.DigestOf$`, calls: [][2]string{{`runtime/store\.DigestOf$`, `.`}},
		whole: pgPkg + `\(\*Store\)\.spec$`},
	{name: "lookup: deadline", what: "the store call's StoreTimeout context, made and canceled",
		calls: [][2]string{{rtPkg + `\(\*exchange\)\.storeCall$`, `^context\.(WithTimeout|WithDeadlineCause\.func.*)$`}},
		whole: `^context\.WithTimeout$|^context\.WithDeadlineCause\.func`},
	{name: "lookup: pool", what: "an idle pooled connection taken and given back",
		calls: [][2]string{{pgPkg, `^github\.com/jackc/pgx/v5/pgxpool\.\(\*(Pool\)\.Acquire|Conn\)\.Release)$`}},
		whole: `pgxpool\.\(\*Pool\)\.Acquire$|pgxpool\.\(\*Conn\)\.Release$`},
	{name: "lookup: read", what: "the SELECT on the connection's pgconn (directread.go), its answer awaited and its row decoded",
		own:   `^github\.com/jackc/pgx/v5(/pgconn|/pgproto3|/pgtype|/pgconn/ctxwatch|/pgconn/internal/bgreader)?\.|` + pgPkg + `(\(\*Store\)\.(read|readProbe|readLimited|direct|readDirect|directStatement)|\(\*readRow\)\..*|newReadRow|directShape|int2|int8v|fixedSize)$`,
		whole: pgPkg + `\(\*Store\)\.(read|readProbe|readLimited)$`},
	{name: "decide", what: "the verdict on the record (exchange.meet, decide)",
		own:   rtPkg + `(\(\*exchange\)\.(meet|storeFailed)|met|decide|classify)$`,
		whole: rtPkg + `\(\*exchange\)\.meet$`},
	{name: "answer", what: "what the client hears for the verdict (answer)",
		own: rtPkg + `answer$`, whole: rtPkg + `answer$`},
	{name: "log", what: "the log line, when the answer has one (Runtime.logResult)",
		own:   rtPkg + `(\(\*Runtime\)\.logResult|\(\*exchange\)\.logAttrs|tenantDigest|keyHash)$`,
		whole: rtPkg + `\(\*Runtime\)\.logResult$`},
	{name: "trace", what: "spans started and ended (no provider set: none)",
		own:   rtPkg + `(\(\*globalTracer\)\.Start|endSpan)$|^go\.opentelemetry\.io/otel/trace/noop\.`,
		whole: rtPkg + `\(\*globalTracer\)\.Start$|` + rtPkg + `endSpan$`},
	{name: "metrics", what: "the Observer's outcome and claim latency, and the clock reads for them",
		own: rtPkg + `(\(\*exchange\)\.executed|NopObserver\..*|\(\*NopObserver\)\..*)$`, calls: [][2]string{{rtPkg + `\(\*exchange\)\.storeCall$`, `^time\.(Now|Since)$`}},
		whole: rtPkg + `\(\*exchange\)\.executed$|\.(Outcome|ClaimLatency)$`},
	{name: "slots", what: "handler slots (a new key's)",
		own:   pgPkg + `\(\*(Store|handlerSlots)\)\.(trySlot|slotFor|freeSlot|waitSlot|acquireTx|mayTake|take|give|try|wait)$`,
		whole: pgPkg + `\(\*(Store|handlerSlots)\)\.(trySlot|slotFor|freeSlot|waitSlot|acquireTx)$`},
	{name: "write", what: "the stored headers and body, or the problem, written (Runtime.finish less log and metrics)",
		own:   rtPkg + `(\(\*Runtime\)\.(finish|problemWriter)|writeReplay|setStoredHeaders|writeResponse|\(\*exchange\)\.(profileHeaders|echoKey|requestIDs)|appendProblemJSON|appendJSONText|WriteProblem|.*ProblemJSON\.func.*|storableHeaders)$`,
		whole: rtPkg + `\(\*Runtime\)\.finish$`, ignore: rtPkg + `\(\*Runtime\)\.logResult$|\.Outcome$`},
}

// glue is the rest of idemgen's own code on the path: the exchange, the state machine's and the
// store's steps between the stages.
var glue = regexp.MustCompile(`^github\.com/idemgen/idemgen/runtime(/pgstore|/store)?\.`)

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
	owned := make([]int64, len(stages))
	var glued int64
	names := make([]string, 0, len(p.Self))
	for fn := range p.Self {
		names = append(names, fn)
	}
	sort.Strings(names)
	own := make([]*regexp.Regexp, len(stages))
	for i, s := range stages {
		if s.own != "" {
			own[i] = regexp.MustCompile(s.own)
		}
	}
	components := callgrind.Components
	compOf := make([]int64, len(components))
	for _, fn := range names {
		base := callgrind.Base(fn)
		matched := false
		for i, re := range own {
			if re != nil && re.MatchString(base) {
				owned[i] += p.Self[fn]
				matched = true
				break
			}
		}
		if !matched && glue.MatchString(base) {
			glued += p.Self[fn]
		}
		for i, c := range components {
			if c.Re.MatchString(base) {
				compOf[i] += p.Self[fn]
				break
			}
		}
	}
	per := func(v int64) string { return fmt.Sprintf("%.0f", float64(v)/float64(n)) }
	fmt.Fprintf(w, "| stage | what runs | instructions/request |\n|---|---|---:|\n")
	staged := glued
	for i, s := range stages {
		v := owned[i]
		for _, c := range s.calls {
			caller, callee := regexp.MustCompile(c[0]), regexp.MustCompile(c[1])
			v += p.CallsBetween(caller, callee)
		}
		staged += v
		fmt.Fprintf(w, "| %s | %s | %s |\n", s.name, s.what, per(v))
	}
	fmt.Fprintf(w, "| runtime glue | idemgen's other own code on the path (the exchange, the state machine's and the store's steps between the stages) | %s |\n", per(glued))
	fmt.Fprintf(w, "| the rest | net/http's server, the allocator, maps and the scheduler (also for the stages above), the harness's handler wrapper and client | %s |\n", per(p.Total-staged))
	fmt.Fprintf(w, "| **total** | | **%s** |\n", per(p.Total))

	// The whole request by component: each function's own instructions, idemgen's code in one
	// row (the stages above split it), the rest by library.
	fmt.Fprintf(w, "\n| component (own instructions of its functions) | instructions/request |\n|---|---:|\n")
	var listed int64
	for i, c := range components {
		listed += compOf[i]
		fmt.Fprintf(w, "| %s | %s |\n", c.Name, per(compOf[i]))
	}
	fmt.Fprintf(w, "| other (the harness's handler wrapper and client, encoding, reflection) | %s |\n", per(p.Total-listed))
	fmt.Fprintf(w, "| **total, the scheduler's excluded (what the guard records)** | **%s** |\n", per(p.Total-compOf[slices.IndexFunc(components, func(c callgrind.Component) bool { return c.Name == callgrind.Scheduler })]))
	return nil
}

// printStages prints each stage's name and pprof focus and ignore expressions, one stage a
// line, tab-separated, for bench/stages.sh.
func printStages(w io.Writer) {
	for _, s := range stages {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.name, s.whole, s.ignore)
	}
}

// workPerRequest is the instructions per request of a callgrind dump of n requests, less the
// scheduler's (callgrind.Scheduler), whose count follows how long the process waited.
func workPerRequest(path string, n int) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	p, err := callgrind.Read(f)
	if err != nil {
		return 0, err
	}
	return float64(p.Total-p.ByComponent()[callgrind.Scheduler]) / float64(n), nil
}
