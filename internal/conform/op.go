package conform

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// opRun is the checking of one operation: its request, its key maker, and what the first
// request established.
type opRun struct {
	r     *runner
	op    *model.Operation
	g     *values
	exp   expectations
	req   *request
	noReq error // why no request could be built
	// unusable says why the checks after first-request cannot run ("" when they can).
	unusable string
	// perExec is the effects one execution makes (effects oracle), 0 when unknown.
	perExec int64
	// firstStatus is the status of first-request's answer: a stored 4xx the checks run on
	// counts as the operation's execution in histories.
	firstStatus int
	// first is first-request's answer and firstReq its request (nil until it established
	// one); firstKept caches whether that key still replays it (stillStored).
	first     *Exchange
	firstReq  *request
	firstMu   sync.Mutex
	firstKept *string
	keySeq    int
	// keys builds keys to a pattern and a length.
	keys *keyBuilder
}

// checkFunc runs one check; it reports through c.
type checkFunc func(ctx context.Context, c *checkRun)

type checkDef struct {
	check Check
	// effects: the check reads the effects oracle, so it runs alone.
	effects bool
	run     checkFunc
}

// opChecks are the per-operation checks in run order; first-request comes first because the
// others need what it establishes.
func opChecks() []checkDef {
	return []checkDef{
		{CheckFirstRequest, true, checkFirst},
		{CheckReplay, true, checkReplay},
		{CheckEquivalent, true, checkEquivalent},
		{CheckExcluded, true, checkExcluded},
		{CheckMismatch, true, checkMismatch},
		{CheckDuplicateMember, false, checkDuplicateMembers},
		{CheckKeyMissing, true, checkKeyMissing},
		{CheckKeyMalformed, true, checkKeyMalformed},
		{CheckKeyReuse, true, checkKeyReuse},
		{CheckUnrouted, false, checkUnrouted},
		{CheckConcurrent, true, checkConcurrent},
		{Check5xxNotStored, false, check5xxNotStored},
		{Check5xxReleases, false, check5xxReleases},
		{Check5xxRollsBack, true, check5xxRollsBack},
		{CheckTenants, true, checkTenants},
	}
}

// checkAll runs the operation's checks, then its fault checks.
func (o *opRun) checkAll(ctx context.Context) []Result {
	var out []Result
	defs := opChecks()
	if o.r.o.Faults {
		defs = append(defs, faultChecks()...)
	}
	for _, d := range defs {
		if !o.r.wanted(d.check) && d.check != CheckFirstRequest {
			continue
		}
		res := o.runCheck(ctx, d)
		if d.check == CheckFirstRequest && !o.r.wanted(d.check) {
			continue // run for what it establishes, not reported
		}
		o.r.progress(&res)
		out = append(out, res)
	}
	return out
}

func (o *opRun) runCheck(ctx context.Context, d checkDef) Result {
	c := &checkRun{o: o, res: Result{Check: d.check, Operation: o.op.ID, Method: o.op.Method, Path: o.op.Path, Status: Pass}}
	began := time.Now()
	defer func() { c.res.Took = Duration(time.Since(began)) }()
	switch {
	case o.noReq != nil:
		c.skip("no valid request could be built: %v; give one with --body %s=JSON or --param NAME=VALUE", o.noReq, o.op.ID)
		return c.res
	case o.unusable != "" && d.check != CheckFirstRequest:
		c.skip("%s", o.unusable)
		return c.res
	case ctx.Err() != nil:
		c.skip("the run's --timeout (%v) ended before this check", o.r.o.Timeout)
		return c.res
	}
	if d.effects && o.r.o.Effects != nil {
		o.r.gate.Lock()
		defer o.r.gate.Unlock()
	} else {
		o.r.gate.RLock()
		defer o.r.gate.RUnlock()
	}
	d.run(ctx, c)
	if c.res.Status == Fail && c.budgetSpent.Load() {
		c.res.Status, c.res.Exchanges = Skip, nil
		c.res.Why = errBudget.Error()
	}
	return c.res
}

// newKey returns a key no other request of the run has used, valid by the operation's key
// rules: characters of its set (visible ASCII without commas by default), a length inside
// minLength..maxLength (32 when it can), matching key.pattern. A pattern's key is built to
// the length (keyBuilder), so that a rule such as ^[!-~]+$ with minLength 16, a UUID, a ULID or
// a prefixed key (stainless-go-<uuid>) each get keys; a pattern the builder cannot read
// (lookarounds) is sampled instead.
func (o *opRun) newKey() (string, error) {
	k := o.op.Settings.Key
	lo, hi := max(k.MinLength, 1), k.MaxLength
	if hi <= 0 {
		hi = 255
	}
	lengths := []int{min(max(lo, 32), hi), lo, hi}
	for try := 0; try < 200; try++ {
		var key string
		if k.Pattern != "" {
			n := lengths[try%len(lengths)]
			if try >= 2*len(lengths) {
				n = lo + o.g.rng.IntN(hi-lo+1)
			}
			built, ok := o.keys.build(k.Pattern, n)
			if !ok {
				var err error
				if built, err = o.g.fromPattern(k.Pattern); err != nil {
					return "", fmt.Errorf("key.pattern: %w", err)
				}
			}
			key = built
			if !o.validKey(key) {
				continue
			}
		} else {
			o.r.mu.Lock()
			o.keySeq++
			seq := o.keySeq
			o.r.mu.Unlock()
			key = fmt.Sprintf("cf%s%s%04d", o.r.runID, o.g.word(6), seq)
			key = fitLength(key, min(max(lo, 32), hi), hi, o.g)
		}
		if _, dup := o.r.keys.LoadOrStore(key, true); dup {
			continue
		}
		return key, nil
	}
	return "", fmt.Errorf("could not make a fresh key of %d to %d characters matching %q", lo, hi, k.Pattern)
}

// keyChars is the character set of the operation's keys: key.characters (runtime/defaults).
func (o *opRun) keyChars() keyCharSet {
	c, _ := defaults.ParseKeyCharacters(o.op.Settings.Key.Characters)
	return keyCharSet(c)
}

// keyCharSet is a key.characters set, asked as the runtime asks it (defaults.KeyText).
type keyCharSet defaults.KeyCharacters

// Allows reports whether the set allows the ASCII character b.
func (k keyCharSet) Allows(b byte) bool { return k.allowsText(string([]byte{b})) }

// allowsText reports whether the set allows every character of s.
func (k keyCharSet) allowsText(s string) bool {
	_, _, err := defaults.KeyText(s, defaults.KeyQuotedLiteral, defaults.KeyCharacters(k))
	return err == nil
}

// validKey reports whether key is valid by the operation's key rules.
func (o *opRun) validKey(key string) bool { return validKeyFor(o.op.Settings.Key, key, o) }

// checkRun is one check of one operation.
type checkRun struct {
	o   *opRun
	res Result
	// budgetSpent: a request of the check was over --max-requests (set from the storm's
	// goroutines too).
	budgetSpent atomic.Bool
}

func (c *checkRun) fail(ex []*Exchange, format string, args ...any) {
	if c.res.Status == Fail {
		return // the first failure is the one shown
	}
	c.res.Status, c.res.Why, c.res.Exchanges = Fail, fmt.Sprintf(format, args...), ex
}

func (c *checkRun) skip(format string, args ...any) {
	c.res.Status, c.res.Why = Skip, fmt.Sprintf(format, args...)
}

func (c *checkRun) note(format string, args ...any) {
	c.res.Notes = append(c.res.Notes, fmt.Sprintf(format, args...))
}

func (c *checkRun) failed() bool { return c.res.Status != Pass }

// key returns a fresh key, or fails the check.
func (c *checkRun) key() (string, bool) {
	k, err := c.o.newKey()
	if err != nil {
		c.skip("%v", err)
		return "", false
	}
	return k, true
}

// send sends w as the checks' tenant.
func (c *checkRun) send(ctx context.Context, label string, w *wire) *Exchange {
	e := c.o.r.c.send(ctx, label, w)
	if e.Err == errBudget.Error() {
		c.budgetSpent.Store(true)
	}
	return e
}

// wire writes req (with key) as the checks' tenant, in a spelling.
func (c *checkRun) wire(req *request, sp spelling) *wire {
	return req.wire(sp, c.o.r.o.Header)
}

// effects reads the oracle; ok is false without one (or when it failed: the check notes it).
func (c *checkRun) effects(ctx context.Context) (int64, bool) {
	if c.o.r.o.Effects == nil {
		return 0, false
	}
	n, err := c.o.r.o.Effects(ctx)
	if err != nil {
		c.note("effects oracle: %v", err)
		return 0, false
	}
	// The resources made for fresh parameters are not the operation's effects.
	n -= c.o.r.fresh.madeEffects()
	return n, true
}

// expectEffects compares the effects made since before with n executions' worth.
func (c *checkRun) expectEffects(ctx context.Context, before int64, hasBefore bool, n int64, what string, ex []*Exchange) {
	if !hasBefore || c.o.perExec == 0 {
		return
	}
	after, ok := c.effects(ctx)
	if !ok {
		return
	}
	if d := after - before; d != n*c.o.perExec {
		c.fail(ex, "%s: the effects oracle counts %d new effects, want %d (%d execution(s) of %d each)", what, d, n*c.o.perExec, n, c.o.perExec)
	}
}

// noAnswer fails the check when e has no answer (showing ex before it); it reports whether it
// did.
func (c *checkRun) noAnswer(e *Exchange, ex ...*Exchange) bool {
	if e.ok() {
		return false
	}
	c.fail(append(ex, e), "%s: no answer: %s", e.Label, e.Err)
	return true
}

// execute sends req with key as a first request and checks it is the kind of answer
// first-request established (an execution, not a replay). It returns the exchange, or nil
// after failing the check.
func (c *checkRun) execute(ctx context.Context, label string, req *request) *Exchange {
	e := c.send(ctx, label, c.wire(req, spellCanonical))
	if c.noAnswer(e) {
		return nil
	}
	if e.replayed() {
		c.fail([]*Exchange{e}, "%s with a fresh key is marked Idempotent-Replayed: true", label)
		return nil
	}
	if e.Status >= 500 {
		c.fail([]*Exchange{e}, "%s with a fresh key: %d", label, e.Status)
		return nil
	}
	if u := c.o.usedUp(e); u != nil {
		c.skipUsedUp(ctx, label, u)
		return nil
	}
	if p := c.o.exp.keyExpiresProblem(e, nil); p != "" && c.o.exp.final(e.Status) {
		c.fail([]*Exchange{e}, "%s, a stored answer: %s", label, p)
		return nil
	}
	return e
}

// usedUp is the one rule every check that needs a fresh execution applies to the answers its
// fresh keys got (docs/conform.md, "Stateful operations"): the first of es that is a 4xx other
// than first-request's answer, which the operation's replay.statuses do not store, and which
// is none of the contract's own refusals (a key in flight, a mismatch: judged by their whole
// shape, so a 409 without Retry-After refusing a closed session is a used-up answer, a 409 in
// flight with it is not). Such an answer is the
// operation refusing a resource it has used up (a released hold answers 404): a correct
// service executes nothing on it and stores nothing, so no execution, replay or effect can be
// seen through it. It returns nil when no answer is one, and when any answer is a 2xx (an
// execution: the check judges it as ever). A stored answer, a 5xx, a replay, a 3xx are judged
// as ever too.
func (o *opRun) usedUp(es ...*Exchange) *Exchange {
	var found *Exchange
	for _, e := range es {
		switch {
		case e == nil || !e.ok() || e.replayed():
		case e.Status/100 == 2:
			return nil
		case found == nil && e.Status/100 == 4 && e.Status != o.firstStatus && !o.exp.final(e.Status) &&
			o.exp.inFlight.judge(e) != "" && o.exp.mismatch.judge(e) != "":
			found = e
		}
	}
	return found
}

// skipUsedUp skips the check for e, an answer usedUp found (label names the request that got
// it), unless the check failed already. The skip is granted only while first-request's key
// still replays its stored answer: a service that stores nothing (every key runs the operation
// again, and the used-up resource refuses it) fails the check instead of hiding behind the
// skip.
func (c *checkRun) skipUsedUp(ctx context.Context, label string, e *Exchange) {
	if why, again := c.o.stillStored(ctx, c); why != "" {
		c.fail(nonNil(c.o.first, again, e), "%s with a fresh key got %d, an answer replay.statuses %s does not store, as if the operation had used up its resource; but first-request's key, sent again, is no replay of its %d either: %s",
			label, e.Status, c.o.rulesText(), c.o.firstStatus, why)
		return
	}
	if c.failed() {
		return
	}
	c.skip("%s with a fresh key got %d, not first-request's %d (the resource was used up?), which replay.statuses %s does not store: this check needs a fresh execution or a stored answer (first-request's key still replays its %d; give --fresh-param for a new resource per key)",
		label, e.Status, c.o.firstStatus, c.o.rulesText(), c.o.firstStatus)
	c.res.Exchanges = []*Exchange{e}
}

// stillStored sends first-request's request again, once per operation, and says how its
// answer is no replay of first-request's ("" when it is one), with the answer (nil when the
// result was known).
func (o *opRun) stillStored(ctx context.Context, c *checkRun) (string, *Exchange) {
	o.firstMu.Lock()
	defer o.firstMu.Unlock()
	if o.firstKept != nil {
		return *o.firstKept, nil
	}
	if o.first == nil {
		why := "first-request established no answer"
		return why, nil
	}
	e := c.send(ctx, "first-request's key again", c.wire(o.firstReq, spellCanonical))
	why := o.sameAnswer(o.first, e)
	o.firstKept = &why
	return why, e
}

func nonNil(es ...*Exchange) []*Exchange {
	var out []*Exchange
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// rulesText is the operation's replay.statuses as declared (the default's when it declares
// none): ["2xx", "4xx", "!404"].
func (o *opRun) rulesText() string {
	parts := make([]string, len(o.exp.rules))
	for i, r := range o.exp.rules {
		parts[i] = fmt.Sprintf("%q", r.String())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// sameAnswer says how b differs from a as a replay of it ("" when it is one): status, body
// bytes, the allow-listed headers, and the replay marker.
func (o *opRun) sameAnswer(a, b *Exchange) string {
	var probs []string
	if !b.ok() {
		return "no answer: " + b.Err
	}
	if b.Status != a.Status {
		probs = append(probs, fmt.Sprintf("status %d, the first answer was %d", b.Status, a.Status))
	}
	if string(a.respBodyRaw) != string(b.respBodyRaw) {
		probs = append(probs, "the body differs from the first answer's")
	}
	headers := append(defaults.ReplayHeaders(), o.op.Settings.Replay.Headers...)
	for _, h := range headers {
		if containsFold(o.exp.replayExempt, h) {
			continue
		}
		if av, bv := strings.Join(a.respHeaderRaw.Values(h), ", "), strings.Join(b.respHeaderRaw.Values(h), ", "); av != bv {
			probs = append(probs, fmt.Sprintf("%s %q, the first answer had %q", h, bv, av))
		}
	}
	for _, l := range o.exp.replayLinks {
		if want := a.header(l[1]); want != "" && b.header(l[0]) != want {
			probs = append(probs, fmt.Sprintf("%s %q, want the first answer's %s %q", l[0], b.header(l[0]), l[1], want))
		}
	}
	if !b.replayed() {
		probs = append(probs, "no Idempotent-Replayed: true")
	}
	if why := echoed(o.exp.echo, b); why != "" {
		probs = append(probs, why)
	}
	if p := o.exp.keyExpiresProblem(b, a); p != "" {
		probs = append(probs, p)
	}
	return strings.Join(probs, "; ")
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// headerFields returns the header lines of h, names sorted.
func headerFields(h http.Header) []field {
	var out []field
	for _, k := range sortedKeys(h) {
		for _, v := range h[k] {
			out = append(out, field{name: k, value: v})
		}
	}
	return out
}
