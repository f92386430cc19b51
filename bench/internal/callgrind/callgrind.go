// Package callgrind reads the profiles valgrind's callgrind tool writes (the "callgrind format",
// valgrind's docs/cl-format) with one event, Ir (instructions executed): each function's own
// instructions and the instructions of its calls to each other function, which is what the
// request-cost reports of bench/ need. Names compressed as "(id) name" are expanded; callgrind's
// recursion contexts ("f'2") are kept apart, as callgrind reports them.
package callgrind

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Profile is one callgrind dump.
type Profile struct {
	// Total is the dump's summary: every instruction of the dump's time range.
	Total int64
	// Self is each function's own instructions.
	Self map[string]int64
	// Calls is the instructions of each caller's calls to each callee, inclusive of what the
	// callee called.
	Calls map[Edge]int64
	// Count is how many calls each edge made.
	Count map[Edge]int64
}

// Edge is a call from Caller to Callee.
type Edge struct{ Caller, Callee string }

// Read parses a callgrind profile of the event Ir.
func Read(r io.Reader) (*Profile, error) {
	p := &Profile{Self: map[string]int64{}, Calls: map[Edge]int64{}, Count: map[Edge]int64{}}
	names := map[string]string{}
	name := func(tok string) string {
		tok = strings.TrimSpace(tok)
		if !strings.HasPrefix(tok, "(") {
			return tok
		}
		id, rest, _ := strings.Cut(tok[1:], ")")
		if rest = strings.TrimSpace(rest); rest != "" {
			names[id] = rest
			return rest
		}
		return names[id]
	}
	var fn, cfn string
	var calls int64
	pending := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.HasPrefix(s, "summary:"), strings.HasPrefix(s, "totals:"):
			v, err := strconv.ParseInt(strings.TrimSpace(s[strings.IndexByte(s, ':')+1:]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("callgrind: line %d: %w", line, err)
			}
			p.Total = v
		case strings.HasPrefix(s, "events:"):
			if ev := strings.Fields(s[len("events:"):]); len(ev) != 1 || ev[0] != "Ir" {
				return nil, fmt.Errorf("callgrind: line %d: events %v, want Ir alone", line, ev)
			}
		case strings.HasPrefix(s, "fn="):
			fn = name(s[3:])
		case strings.HasPrefix(s, "cfn="):
			cfn = name(s[4:])
		case strings.HasPrefix(s, "cfi="), strings.HasPrefix(s, "cfl="), strings.HasPrefix(s, "cob="),
			strings.HasPrefix(s, "fl="), strings.HasPrefix(s, "fi="), strings.HasPrefix(s, "fe="), strings.HasPrefix(s, "ob="):
			// file and object names: not needed
		case strings.HasPrefix(s, "calls="):
			f := strings.Fields(s[len("calls="):])
			if len(f) == 0 {
				return nil, fmt.Errorf("callgrind: line %d: %q", line, s)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("callgrind: line %d: %w", line, err)
			}
			calls, pending = n, true
		case s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '+' || s[0] == '-' || s[0] == '*'):
			f := strings.Fields(s)
			if len(f) < 2 {
				continue // a position without cost
			}
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("callgrind: line %d: %w", line, err)
			}
			if pending {
				e := Edge{fn, cfn}
				p.Calls[e] += v
				p.Count[e] += calls
				pending = false
			} else {
				p.Self[fn] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// CallsBetween is the instructions of the calls from functions matching caller to functions
// matching callee, each with everything the callee ran (recursion contexts included on both
// sides). callgrind attributes a call by its shadow call stack, which Go's goroutine switches
// leave stale: the figure is the call's own only for calls that never park their goroutine.
func (p *Profile) CallsBetween(caller, callee *regexp.Regexp) int64 {
	var n int64
	for e, v := range p.Calls {
		if caller.MatchString(Base(e.Caller)) && callee.MatchString(Base(e.Callee)) && Base(e.Caller) != Base(e.Callee) {
			n += v
		}
	}
	return n
}

// SelfOf is the own instructions of the functions whose names match re, recursion included.
func (p *Profile) SelfOf(re *regexp.Regexp) int64 {
	var n int64
	for f, v := range p.Self {
		if re.MatchString(Base(f)) {
			n += v
		}
	}
	return n
}

var recursion = regexp.MustCompile(`'[0-9]+$`)

// Base is a function's name without callgrind's recursion context ("f'2" is f).
func Base(f string) string { return recursion.ReplaceAllString(f, "") }

// Component is a group of functions of a Go program, by whose code they are.
type Component struct {
	Name string
	Re   *regexp.Regexp
}

// Scheduler names the component whose count follows time rather than work: Go's scheduler,
// timers, clocks, system-call wrappers and sysmon, which run more the longer the process waits
// (for PostgreSQL's answer, say), and valgrind makes every wait long and variable.
const Scheduler = "scheduler, timers, clocks, system calls"

// Components are the groups of a request's functions, each function in the first that matches
// it (the others: "other").
var Components = []Component{
	{"idemgen (runtime, pgstore, canonical, gen, the generated code)", regexp.MustCompile(`^github\.com/idemgen/idemgen/(runtime|golden)`)},
	{"SHA-256 (valgrind's CPU has no SHA extensions: AVX2 code)", regexp.MustCompile(`sha256`)},
	{"pgx and its pool", regexp.MustCompile(`^github\.com/jackc/|^golang\.org/x/sync/semaphore`)},
	{"contexts", regexp.MustCompile(`^context\.`)},
	{"allocation", regexp.MustCompile(`^runtime\.(mallocgc.*|newobject|newarray|makeslice.*|growslice|makemap.*|convT.*|slicebytetostring|concatstring.*|rawstring.*|rawbyteslice|heapSetType.*|\(\*mspan\)\..*|\(\*mcache\)\..*|\(\*mcentral\)\..*|\(\*mheap\)\..*|memclrNoHeapPointers.*|nextFreeFast|deductAssistCredit|publicationBarrier|gcWriteBarrier.*|wbBufFlush.*|bulkBarrier.*|typedmemmove|typedslicecopy|profilealloc)$`)},
	{"maps", regexp.MustCompile(`^internal/runtime/maps\.|^runtime\.(map.*|aeshash.*|memhash.*|strhash|interhash|nilinterhash|efaceHash|typehash)$|^aeshash`)},
	{Scheduler, regexp.MustCompile(`^runtime\.|^internal/runtime/|^syscall\.|^internal/poll\.|^gogo|^time\.`)},
	{"net/http's server, its headers and buffers", regexp.MustCompile(`^(net/http|net/textproto|bufio|net/url|net|mime|path|io|bytes|strings|strconv|internal/strconv|internal/bytealg|internal/stringslite|unicode/utf8)\.|^(indexbyte|memeqbody|cmpbody|countbody)`)},
}

// ByComponent is the own instructions of each of Components' groups, by name, and "other".
func (p *Profile) ByComponent() map[string]int64 {
	out := map[string]int64{}
	for fn, v := range p.Self {
		name, base := "other", Base(fn)
		for _, c := range Components {
			if c.Re.MatchString(base) {
				name = c.Name
				break
			}
		}
		out[name] += v
	}
	return out
}
