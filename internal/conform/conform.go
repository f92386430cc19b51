// Package conform checks a live service against the Idempotency-Key contract from outside, over
// HTTP: for every operation a spec marks idempotent (x-idempotent, a config file, an overlay or
// --infer, resolved by internal/spec), it derives request sequences from the operation's
// resolved settings and schemas — a first request, its replay, the same request spelt
// otherwise, a changed field, missing and malformed keys, a key reused on another operation,
// concurrent duplicates, a server error, another tenant — sends them, and judges each answer
// by the contract (docs/design.md sections 2 to 5) in the words of the operation's profile. With
// faults it puts a proxy of its own between itself and the service (connections reset after
// the service executed, deliveries delayed or duplicated) and checks every key's history with
// the contract's model (internal/history). An effects oracle (a command that counts the
// service's business effects) turns "runs nothing" and "executes once" into checks.
//
// The service can be written in any language; nothing here imports the runtime's machine.
package conform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemgen/idemgen/internal/model"
)

// Options configure a run. Zero values take the defaults stated on each field.
type Options struct {
	// BaseURL is the service's URL ("http://127.0.0.1:8080", or with a path prefix).
	BaseURL string
	// Profile, when set, names the row of the contract table (runtime/defaults.Profiles:
	// "idemgen", "stripe") whose words the answers must use: its problem types and codes, as
	// well as its statuses. "" takes the spec's own `profile:`; a spec without one is judged
	// by its statuses, Retry-After, replay markers and declared error responses, in any words.
	Profile string
	// Header is sent with every request: the credentials of the tenant the checks run as.
	Header http.Header
	// TenantHeader replaces Header for a second tenant, for tenant-isolation; nil skips it.
	TenantHeader http.Header
	// Params are values for path, query and header parameters by name, used instead of
	// generated ones (an id of a resource that exists).
	Params map[string]string
	// FreshParams make a new value of a parameter, by name, for each key: a resource that a
	// stateful operation consumes (complete or cancel closes a checkout session, so a second
	// key's request to the same session meets another state). Every request with one key
	// names the same value. They win over Params.
	FreshParams map[string]FreshFunc
	// Bodies are request bodies by operationId, used instead of generated ones (JSON text, or
	// a form body "a=1&b=2").
	Bodies map[string][]byte
	// FailHeader asks the service to fail with a 5xx after doing its work (a test knob of the
	// service, such as X-Test-Fail: 500); nil skips the 5xx checks.
	FailHeader http.Header
	// DelayHeader asks the service to take its time inside the handler (X-Test-Delay: 300ms),
	// so that concurrent duplicates meet the first in flight; nil sends copies as they are.
	DelayHeader http.Header
	// Effects is the effects oracle; nil leaves effects unchecked.
	Effects Effects
	// CasesDir is a folder of request-sequence cases (internal/cases format) to run too.
	CasesDir string
	// Faults runs the fault checks through a loopback proxy.
	Faults bool
	// Short runs fewer keys and rounds in the fault checks (CI).
	Short bool
	// Visualize keeps porcupine's drawing of every faulted history in the report, for
	// WriteHTML.
	Visualize bool
	// Checks and Operations, when not empty, keep only the named checks and operationIds.
	Checks     []Check
	Operations []string
	// Duplicates is how many copies concurrent-duplicates sends at once; default 8.
	Duplicates int
	// Concurrency is how many operations are checked at once; default 4 (1 with an effects
	// oracle, whose counts must not mix).
	Concurrency int
	// MaxRequests bounds the requests of the run; default 20000. Checks past it skip.
	MaxRequests int
	// Timeout bounds the whole run; default 5 minutes. Checks past it skip.
	Timeout time.Duration
	// RequestTimeout bounds one request; default 30 seconds.
	RequestTimeout time.Duration
	// Seed makes the generated requests and keys; 0 picks one (the report says which).
	Seed uint64
	// Progress receives one line per check as it ends (a terminal); nil is quiet.
	Progress io.Writer
	// Transport sends the requests; nil uses a transport of the run's own.
	Transport http.RoundTripper
}

// UnreachableError is Run's error when the service does not answer at all.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s: %v (is the service running? --base-url)", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Run checks the service at o.BaseURL against doc's operations. It returns the report, or an
// error when the run could not be made: bad options, or a service that does not answer
// (*UnreachableError).
func Run(ctx context.Context, doc *model.Document, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 4 * max(o.Duplicates, o.Concurrency)
		t.DisableCompression = true
		defer t.CloseIdleConnections()
		tr = t
	}
	c := &client{base: o.BaseURL, http: &http.Client{Transport: tr, CheckRedirect: noRedirects}, timeout: o.RequestTimeout, budget: int64(o.MaxRequests)}
	if err := probe(ctx, c); err != nil {
		return nil, err
	}
	// Keys carry a nonce of the run, whatever the seed: a service keeps its records between
	// runs, and a key of an earlier run would replay its answer.
	nonce := rand.Uint64()
	r := &runner{o: &o, doc: doc, c: c, runID: fmt.Sprintf("%06x", nonce&0xffffff), nonce: nonce, fresh: newFreshValues(o.FreshParams, o.Effects)}
	rep := &Report{Spec: doc.Source, BaseURL: o.BaseURL, Started: time.Now(), Seed: o.Seed}
	r.rep = rep
	if o.Faults {
		p, err := startProxy(o.BaseURL)
		if err != nil {
			return nil, err
		}
		defer p.close()
		r.proxy = p
	}
	checked := r.run(ctx)
	if o.CasesDir != "" {
		r.runCases(ctx)
	}
	rep.findUnchecked(checked)
	rep.Took = Duration(time.Since(rep.Started))
	rep.Requests = c.sent.Load()
	if o.MaxRequests > 0 && rep.Requests > int64(o.MaxRequests) {
		rep.Requests = int64(o.MaxRequests)
		rep.Notes = append(rep.Notes, fmt.Sprintf("the request budget (--max-requests %d) was spent: the checks after it skipped", o.MaxRequests))
	}
	if ctx.Err() != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the run's --timeout (%v) ended it: the checks after it skipped", o.Timeout))
	}
	return rep, nil
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (o *Options) defaults() error {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--base-url %q: want an http or https URL such as http://127.0.0.1:8080", o.BaseURL)
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.Duplicates <= 0 {
		o.Duplicates = 8
	}
	if o.Duplicates < 2 {
		o.Duplicates = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
		if o.Effects != nil {
			o.Concurrency = 1
		}
	}
	if o.MaxRequests == 0 {
		o.MaxRequests = 20000
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return nil
}

// probe checks that something answers at the base URL: any HTTP answer will do.
func probe(ctx context.Context, c *client) error {
	e := c.send(ctx, "probe", &wire{method: http.MethodGet, target: "/"})
	if e.ok() {
		c.sent.Add(-1) // the probe does not count against the budget
		return nil
	}
	return &UnreachableError{URL: c.base, Err: errors.New(e.Err)}
}

// runner is one run.
type runner struct {
	o     *Options
	doc   *model.Document
	c     *client
	runID string
	nonce uint64 // the run's random nonce (runID is its last 24 bits)
	// gate keeps effect measurements apart: a check that reads the oracle holds it alone,
	// every other check shares it.
	gate  sync.RWMutex
	mu    sync.Mutex
	rep   *Report
	ops   []*opRun
	keys  sync.Map // keys handed out, so none is used twice
	proxy *proxy   // the fault proxy (Faults)
	fresh *freshValues
}

// run checks every operation, Concurrency at a time, each operation's checks in order, and
// returns the operationIds it checked.
func (r *runner) run(ctx context.Context) []string {
	var checked []*opRun
	for i, op := range r.doc.Operations {
		o := &opRun{r: r, op: op, g: newValues(r.o.Seed + uint64(i)*7919), exp: expectationsFor(op, r.o.Profile)}
		// Keys built to a pattern take the run's nonce too: a service keeps its records between
		// runs, and a key of an earlier run (same --seed) would replay its answer.
		o.keys = &keyBuilder{rng: rand.New(rand.NewPCG(r.o.Seed+uint64(i), r.nonce)), allow: o.keyChars().Allows}
		o.req, o.noReq = buildRequest(op, o.g, r.o)
		if o.req != nil {
			o.req.fresh = r.fresh
		}
		r.ops = append(r.ops, o) // every operation, for key-other-operation
		if len(r.o.Operations) == 0 || slices.Contains(r.o.Operations, op.ID) {
			checked = append(checked, o)
		}
	}
	sem := make(chan struct{}, r.o.Concurrency)
	var wg sync.WaitGroup
	results := make([][]Result, len(checked))
	for i, o := range checked {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = o.checkAll(ctx)
		}()
	}
	wg.Wait()
	var ids []string
	for i, rs := range results {
		r.rep.Results = append(r.rep.Results, rs...)
		ids = append(ids, checked[i].op.ID)
	}
	return ids
}

// wanted reports whether the options keep check c.
func (r *runner) wanted(c Check) bool {
	return len(r.o.Checks) == 0 || slices.Contains(r.o.Checks, c)
}

// progress prints a result's line on a terminal.
func (r *runner) progress(res *Result) {
	if r.o.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("%-4s %s", res.Status, res.title())
	if res.Status != Pass && res.Why != "" {
		line += ": " + firstLine(res.Why)
	}
	fmt.Fprintln(r.o.Progress, line)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
