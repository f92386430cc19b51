// Package reconcile matches a payment provider's report (its export of charges: idempotency
// key, amount, currency, status, time) against idemgen's provider call log, and lists every
// desynchronisation, per class, with counts. It never changes a record by itself: Resolve writes
// the resolutions an operator confirmed, with an audit trail.
//
// A lease-mode handler calls its provider under Lease.ProviderKey, and the runtime records that
// key before the call (store.Store.BeginCall). A request that ends without knowing what the
// provider did (the process killed in the call phase, the lease lost, the completion failed, a
// 503 "outcome unknown") leaves an uncertain record; its client's retry usually resolves it, but
// not when the client never retries. Reconciling daily with the provider's report finds those,
// and the rest of the desynchronisations:
//
//	res, err := reconcile.Run(ctx, st, report, reconcile.Options{Finding: logFinding})
//	// res.Counts[reconcile.ChargedNoRecord]: money moved, the client may not know
//	done, err := reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{Operator: "ops@example.com", Reason: "daily report"})
//
// The store is runtime/pgstore (store.Reconcilable), which also keeps the call log of a paired
// Redis lease store. `idemgen reconcile` is the same from the command line. docs/runtime.md,
// "Uncertain outcomes and reconciliation", explains the classes and what to do with each.
//
// Run reads the report streaming and the call log by primary key, a batch of lines per
// statement, then the calls of the report's window by time: its memory is one batch and 16 bytes
// per report line (the set of keys the report mentions, for the record-side checks).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// Options configures Run. Zero values take the defaults stated on each field.
type Options struct {
	// Format is the report's format; default Detect.
	Format Format
	// Columns names the report's columns; zero fields take DefaultColumns'. Set a field to
	// "-" for a column the report does not have (Amount, Currency, Time).
	Columns Columns
	// Comma is the CSV delimiter; default ','.
	Comma rune
	// AmountDecimal reads amounts as decimals in major units ("12.50"), converted to minor units
	// with the currency's ISO 4217 exponent; default: integers in minor units.
	AmountDecimal bool
	// Charged and NotCharged are the statuses (case-insensitive) of a charge that moved money
	// and of one that did not. Lines with any other status (pending, refunded, disputed) are
	// counted and not compared. Defaults: DefaultCharged, DefaultNotCharged.
	Charged, NotCharged []string
	// From and To bound the window of the record-side checks (a completed record, or an
	// uncertain one, whose call the report does not mention): calls started in [From, To -
	// Margin). Defaults: the earliest and the latest line's Time; without times in the report
	// and without both set, those checks are skipped (Result.Window says so).
	From, To time.Time
	// Margin leaves out of the record-side checks the calls started in the window's last
	// Margin, which the provider may have dated after the report's end; default 5 minutes.
	Margin time.Duration
	// ReportComplete declares that the report lists every call the provider received in its
	// window: an uncertain record whose call it does not mention never charged
	// (UncertainNotCharged, released by a resolution) instead of UncertainUnreported.
	ReportComplete bool
	// BatchSize is how many report lines one read of the call log looks up; default 2000.
	// Concurrency is how many of those reads are in flight at once, while earlier batches are
	// classified (each holds a connection of the store's pool); default 4. Memory holds
	// Concurrency + 1 batches.
	BatchSize, Concurrency int
	// Finding, when set, receives every finding as it is found (streaming: Run keeps only the
	// resolvable ones). An error it returns stops Run.
	Finding func(Finding) error
	// Observer, when set, receives the run's counts when it ends (runtime/prometheus exports
	// them as the idemgen_reconcile_* metrics).
	Observer Observer
}

// DefaultCharged and DefaultNotCharged are the report statuses Run understands by default
// (Stripe's, Adyen's and PayPal's words for the same facts).
var (
	DefaultCharged    = []string{"succeeded", "paid", "captured", "charged", "settled", "completed"}
	DefaultNotCharged = []string{"failed", "declined", "refused", "canceled", "cancelled", "voided", "expired", "error"}
)

// Observer receives the outcome of each reconciliation run. runtime/prometheus implements it.
type Observer interface {
	Reconciled(Summary)
}

// Summary is what an Observer receives: the number of findings of every class (all of
// Classes, zeros included), the report's lines, and when the run ended.
type Summary struct {
	Counts map[Class]int64
	Lines  int64
	At     time.Time
}

// Result is what Run found.
type Result struct {
	// Lines counts the report's lines; Foreign the lines whose key is not a provider key of
	// idemgen's (not 64 hex digits: charges made by other means); Ignored the lines whose
	// status is neither charged nor not charged; Matched the lines both sides agree on; InFlight
	// the charges whose record's call phase or completion still runs; Unknown the lines that
	// charged nothing and that the call log does not know.
	Lines, Foreign, Ignored, Matched, InFlight, Unknown int64
	// Counts is the number of findings of each class (every class of Classes is present).
	Counts map[Class]int64
	// Window is the range of call starts of the record-side checks; zero when they were skipped
	// (the report has no times, or its times span less than Options.Margin: set Options.From
	// and To).
	Window struct{ From, To time.Time }
	// Span is the earliest and the latest time of the report's lines; zero when the report
	// has no times.
	Span struct{ First, Last time.Time }
	// Resolvable are the findings whose Action is not NoAction, for Resolve.
	Resolvable []Finding
	// Duration is how long the run took.
	Duration time.Duration
}

// Desync reports whether the result holds a desynchronisation (ChargedNoRecord,
// RecordNoCharge or AmountMismatch).
func (r *Result) Desync() bool {
	for c, n := range r.Counts {
		if n > 0 && c.Desync() {
			return true
		}
	}
	return false
}

// Run reconciles the provider's report with src's call log and returns what it found. It never
// writes. Errors: a *LineError for a report line that cannot be read (nothing after it is
// read), the report's or the store's errors (wrapped), or Options.Finding's.
func Run(ctx context.Context, src store.Reconcilable, report io.Reader, opts Options) (*Result, error) {
	start := time.Now()
	cols := opts.columns()
	rd, err := open(report, opts.Format, cols, opts.Comma, opts.AmountDecimal)
	if err != nil {
		return nil, err
	}
	r := &run{src: src, opts: &opts, res: &Result{Counts: map[Class]int64{}}, statuses: statusSet(opts)}
	for _, c := range Classes {
		r.res.Counts[c] = 0
	}
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 2000
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the lookups still in flight when Run returns early
	lines := make([]Line, 0, batch)
	for {
		l, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		r.res.Lines++
		if !l.Time.IsZero() {
			if r.first.IsZero() || l.Time.Before(r.first) {
				r.first = l.Time
			}
			if l.Time.After(r.last) {
				r.last = l.Time
			}
		}
		pk, p, ok := parseKey(l.ProviderKey)
		if !ok {
			r.res.Foreign++
			continue
		}
		l.ProviderKey = pk
		r.seen = append(r.seen, p)
		if lines = append(lines, l); len(lines) == batch {
			if err := r.submit(ctx, lines); err != nil {
				return nil, err
			}
			lines = make([]Line, 0, batch)
		}
	}
	if err := r.submit(ctx, lines); err != nil {
		return nil, err
	}
	for len(r.queue) > 0 {
		if err := r.classifyNext(); err != nil {
			return nil, err
		}
	}
	if err := r.unreported(ctx); err != nil {
		return nil, err
	}
	r.res.Duration = time.Since(start)
	if opts.Observer != nil {
		opts.Observer.Reconciled(Summary{Counts: maps(r.res.Counts), Lines: r.res.Lines, At: time.Now()})
	}
	return r.res, nil
}

func maps(m map[Class]int64) map[Class]int64 {
	out := make(map[Class]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// run is the state of one Run.
type run struct {
	src         store.Reconcilable
	opts        *Options
	res         *Result
	statuses    map[string]statusKind
	seen        []keyPrefix
	first, last time.Time
	// queue holds the batches whose calls are being read, oldest first: they are classified
	// in the report's order.
	queue []*lookup
}

// lookup is one batch of lines and the read of its calls.
type lookup struct {
	lines []Line
	done  chan struct{}
	calls []store.CallRecord
	err   error
}

// submit starts the read of a batch's calls, and classifies the oldest batch once Concurrency
// reads are in flight.
func (r *run) submit(ctx context.Context, lines []Line) error {
	if len(lines) == 0 {
		return nil
	}
	lk := &lookup{lines: lines, done: make(chan struct{})}
	go func() {
		defer close(lk.done)
		keys := make([]string, len(lines))
		for i := range lines {
			keys[i] = lines[i].ProviderKey
		}
		lk.calls, lk.err = r.src.FindCalls(ctx, keys)
	}()
	r.queue = append(r.queue, lk)
	n := r.opts.Concurrency
	if n <= 0 {
		n = 4
	}
	if len(r.queue) >= n {
		return r.classifyNext()
	}
	return nil
}

// classifyNext waits for the oldest batch's calls and classifies its lines.
func (r *run) classifyNext() error {
	lk := r.queue[0]
	r.queue = r.queue[1:]
	<-lk.done
	if lk.err != nil {
		return fmt.Errorf("reconcile: %w", lk.err)
	}
	lines, calls := lk.lines, lk.calls
	byKey := make(map[string]*store.CallRecord, len(calls))
	for i := range calls {
		byKey[calls[i].ProviderKey] = &calls[i]
	}
	for i := range lines {
		l := lines[i]
		v, f := classifyLine(&l, r.statuses[strings.ToLower(l.Status)], byKey[l.ProviderKey])
		switch v {
		case verdictMatched:
			r.res.Matched++
		case verdictInFlight:
			r.res.InFlight++
		case verdictIgnored:
			r.res.Ignored++
		case verdictUnknown:
			r.res.Unknown++
		case verdictFinding:
			if err := r.found(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// unreported runs the record-side checks: the calls of the window that no line mentions.
func (r *run) unreported(ctx context.Context) error {
	r.res.Span.First, r.res.Span.Last = r.first, r.last
	from, to := r.opts.From, r.opts.To
	if from.IsZero() {
		from = r.first
	}
	if to.IsZero() {
		to = r.last
	}
	margin := r.opts.Margin
	if margin <= 0 {
		margin = 5 * time.Minute
	}
	to = to.Add(-margin)
	if from.IsZero() || to.IsZero() || !from.Before(to) {
		return nil // no window: the report has no times, or spans less than the margin
	}
	r.res.Window.From, r.res.Window.To = from, to
	slices.SortFunc(r.seen, keyPrefix.compare)
	err := r.src.ScanCalls(ctx, from, to, func(c *store.CallRecord) error {
		if p, valid := prefixOf(c.ProviderKey); valid {
			if _, ok := slices.BinarySearchFunc(r.seen, p, keyPrefix.compare); ok {
				return nil
			}
		}
		f, ok := classifyUnreported(c, r.opts.ReportComplete)
		if !ok {
			return nil
		}
		cc := *c
		f.Call = &cc
		return r.found(f)
	})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return nil
}

// found counts f, keeps it when it is resolvable, and hands it to Options.Finding.
func (r *run) found(f Finding) error {
	r.res.Counts[f.Class]++
	if f.Action != NoAction {
		if f.Call != nil {
			// A copy: f.Call points into its batch's calls, which Resolvable must not keep
			// (a finding every 1,000 lines kept every batch, 0.6 KB a report line).
			c := *f.Call
			f.Call = &c
		}
		r.res.Resolvable = append(r.res.Resolvable, f)
	}
	if r.opts.Finding != nil {
		return r.opts.Finding(f)
	}
	return nil
}

func (o *Options) columns() Columns {
	c := o.Columns
	d := DefaultColumns
	pick := func(v, def string) string {
		switch v {
		case "":
			return def
		case "-":
			return ""
		}
		return v
	}
	return Columns{Key: pick(c.Key, d.Key), Status: pick(c.Status, d.Status), Amount: pick(c.Amount, d.Amount),
		Currency: pick(c.Currency, d.Currency), Time: pick(c.Time, d.Time)}
}

func statusSet(o Options) map[string]statusKind {
	charged, not := o.Charged, o.NotCharged
	if charged == nil {
		charged = DefaultCharged
	}
	if not == nil {
		not = DefaultNotCharged
	}
	m := map[string]statusKind{}
	for _, s := range not {
		m[strings.ToLower(strings.TrimSpace(s))] = statusNotCharged
	}
	for _, s := range charged {
		m[strings.ToLower(strings.TrimSpace(s))] = statusCharged
	}
	return m
}

// parseKey returns a report key as a provider key (64 lowercase hex digits) with its prefix,
// or false.
func parseKey(k string) (string, keyPrefix, bool) {
	p, ok := prefixOf(k)
	if !ok {
		return "", p, false
	}
	return strings.ToLower(k), p, true
}

// keyPrefix is the first 128 bits of a provider key: what the set of keys a report mentions
// keeps of each (two keys that share it are about 2^64 keys away).
type keyPrefix [2]uint64

// prefixOf checks that k is 64 hex digits (any case) and returns its prefix, without
// allocating.
func prefixOf(k string) (keyPrefix, bool) {
	var p keyPrefix
	if len(k) != 64 {
		return p, false
	}
	for i := 0; i < 64; i++ {
		var v byte
		switch c := k[i]; {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return keyPrefix{}, false
		}
		if i < 32 {
			p[i/16] = p[i/16]<<4 | uint64(v)
		}
	}
	return p, true
}

func (a keyPrefix) compare(b keyPrefix) int {
	switch {
	case a[0] < b[0]:
		return -1
	case a[0] > b[0]:
		return 1
	case a[1] < b[1]:
		return -1
	case a[1] > b[1]:
		return 1
	}
	return 0
}
