package conform

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgen/idemgen/internal/history"
)

func faultChecks() []checkDef {
	return []checkDef{
		{CheckLostResponse, true, checkLostResponse},
		{CheckLateDuplicate, true, checkLateDuplicate},
		{CheckTwoConnections, true, checkTwoConnections},
		{CheckStorm, true, checkStorm},
	}
}

// HistoryResult is a faulted check's client-visible history and its verdict.
type HistoryResult struct {
	// Verdict is porcupine's: Ok, Illegal, or Unknown (the check ran out of time).
	Verdict  string    `json:"verdict"`
	Keys     int       `json:"keys"`
	Attempts []Attempt `json:"attempts"`
	// Visualization is porcupine's HTML drawing of the history (kept for --html).
	Visualization string `json:"-"`
}

// Attempt is one answer of the service in a faulted history.
type Attempt struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	// Body is "v0" for the operation's request, "v1" for the changed one.
	Body string `json:"body"`
	// Via is the fault the attempt went through.
	Via    string   `json:"via"`
	Call   Duration `json:"call"`
	Return Duration `json:"return"`
	Status int      `json:"status"`
	Kind   string   `json:"kind"`
	// ClientSaw is what the client got when it differs from the service's answer (a reset).
	ClientSaw string `json:"clientSaw,omitempty"`
}

// tape records a faulted check's attempts.
type tape struct {
	c     *checkRun
	start time.Time
	mu    sync.Mutex
	seq   int
	sent  []sentAttempt
}

// sentAttempt is one request the client sent, and what it saw.
type sentAttempt struct {
	id, key, body, via string
	logical            int
	call, ret          time.Time
	e                  *Exchange
}

func (c *checkRun) newTape() *tape { return &tape{c: c, start: time.Now()} }

// send sends req as attempt of logical client l through the proxy with fault ("" for none),
// giving up after patience.
func (t *tape) send(ctx context.Context, l int, key, body string, req *request, fault string, patience time.Duration) *Exchange {
	t.mu.Lock()
	t.seq++
	// The fault proxy is the run's, shared by the operations checked at once, and keeps the
	// service's answers by attempt: the name carries the operation, so that two operations
	// running the same check never take each other's answers.
	id := fmt.Sprintf("%s/%s-%d", t.c.o.op.ID, t.c.res.Check, t.seq)
	t.mu.Unlock()
	w := t.c.wire(req, spellCanonical)
	w.header = append(w.header, field{name: headerAttempt, value: id})
	via := "proxy"
	if fault != "" {
		w.header = append(w.header, field{name: headerFault, value: fault})
		via = "proxy: " + fault
	}
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	call := time.Now()
	e := t.c.o.r.c.sendTo(ctx, t.c.o.r.proxy.url(), fmt.Sprintf("attempt %s (%s)", id, via), w)
	if e.Err == errBudget.Error() {
		t.c.budgetSpent.Store(true)
	}
	if !e.ok() && ctx.Err() != nil && patience < t.c.o.r.o.RequestTimeout {
		e.Err = fmt.Sprintf("the client gave up after %v", patience)
	}
	t.mu.Lock()
	t.sent = append(t.sent, sentAttempt{id: id, key: key, body: body, via: via, logical: l, call: call, ret: time.Now(), e: e})
	t.mu.Unlock()
	return e
}

// attempts builds the history: one attempt per answer the service gave the proxy (what it
// decided), and one per request whose answer the proxy never got (an unknown outcome).
func (t *tape) attempts() ([]history.Attempt, []Attempt) {
	t.c.o.r.proxy.drain()
	mode := string(t.c.o.op.Settings.Mode)
	var hs []history.Attempt
	var shown []Attempt
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sent {
		ups := t.c.o.r.proxy.take(s.id)
		if len(ups) == 0 {
			ups = []upstream{{attempt: s.id, call: s.call, ret: s.ret, status: s.e.Status, header: s.e.respHeaderRaw, body: s.e.respBodyRaw, err: s.e.Err}}
		}
		for _, u := range ups {
			kind := t.c.o.kind(u.status, u.header, u.body)
			a := history.Attempt{ID: fmt.Sprintf("%s.%d", s.id, u.copy), Logical: s.logical, Mode: mode, Key: s.key, Body: s.body, Replica: s.via,
				Call: u.call.Sub(t.start), Return: u.ret.Sub(t.start), Status: u.status, Kind: kind, Detail: u.err}
			if kind == history.KindOK || kind == history.KindReplay {
				sum := sha256.Sum256(u.body)
				a.Resp = fmt.Sprintf("%d %x", u.status, sum[:6])
			}
			if u.header != nil {
				a.RetryAfter = u.header.Get("Retry-After")
			}
			hs = append(hs, a)
			sa := Attempt{ID: a.ID, Key: s.key, Body: s.body, Via: s.via, Call: Duration(a.Call), Return: Duration(a.Return), Status: u.status, Kind: kind.String()}
			if s.e.Status != u.status || (s.e.Err != "" && u.err == "") {
				sa.ClientSaw = "no answer: " + s.e.Err
				if s.e.ok() {
					sa.ClientSaw = fmt.Sprint(s.e.Status)
				}
			}
			shown = append(shown, sa)
		}
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].Call < hs[j].Call })
	// An answer that repeats an execution's bytes exactly is that execution replayed, marked
	// or not (the replay check reports a missing Idempotent-Replayed); the effects oracle,
	// not the history, catches a service whose executions all answer the same bytes.
	seen := map[string]bool{}
	for i := range hs {
		a := &hs[i]
		k := a.Key + "\x00" + a.Resp
		switch {
		case a.Kind == history.KindOK && seen[k]:
			a.Kind = history.KindReplay
			for j := range shown {
				if shown[j].ID == a.ID {
					shown[j].Kind = "replay (unmarked)"
				}
			}
		case a.Kind == history.KindOK:
			seen[k] = true
		}
	}
	sort.SliceStable(shown, func(i, j int) bool { return shown[i].Call < shown[j].Call })
	return hs, shown
}

// judge checks the history with the contract's model and attaches it to the result.
func (t *tape) judge() {
	hs, shown := t.attempts()
	keys := map[string]bool{}
	for _, a := range hs {
		keys[a.Key] = true
	}
	// An answer the contract has no place for (a 417 for a mismatch) fails the check by itself;
	// for the model it may have done anything, so the rest of the history is still judged.
	others := map[int]int{}
	for i := range hs {
		if hs[i].Kind == history.KindOther {
			others[hs[i].Status]++
			hs[i].Kind = history.KindUnknown
		}
	}
	if len(others) > 0 {
		var parts []string
		for _, st := range sortedInts(others) {
			parts = append(parts, fmt.Sprintf("%d ×%d", st, others[st]))
		}
		t.c.fail(nil, "the service gave answers the contract has no place for (%s): a mismatch is %d, a key in flight 409", strings.Join(parts, ", "), t.c.o.exp.mismatch.status)
	}
	opts := history.ModelOptions{Retention: t.c.o.op.Settings.Retention}
	v, info := history.Check(hs, opts, 20*time.Second)
	hr := &HistoryResult{Verdict: string(v.Result), Keys: len(keys), Attempts: shown}
	if t.c.o.r.o.Visualize {
		var b bytes.Buffer
		if err := history.Visualize(&b, opts, info); err == nil {
			hr.Visualization = b.String()
		}
	}
	t.c.res.History = hr
	switch v.Result {
	case porcupine.Illegal:
		t.c.fail(nil, "the history of %d attempt(s) on %d key(s) is not linearizable: no order of the attempts explains every answer under the contract (at most one execution per key, replays carry it, mismatches only for another request); %s",
			len(hs), len(keys), describeHistory(shown))
	case porcupine.Unknown:
		t.c.note("the linearizability check ran out of time (%d attempts)", len(hs))
	}
}

func sortedInts(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func describeHistory(as []Attempt) string {
	var parts []string
	for _, a := range as {
		s := fmt.Sprintf("%s %s %s→%d %s", a.ID, a.Body, a.Via, a.Status, a.Kind)
		if a.ClientSaw != "" {
			s += " (client saw " + a.ClientSaw + ")"
		}
		parts = append(parts, s)
	}
	return "attempts: " + strings.Join(parts, "; ")
}

// kind is what an answer means for the contract's model. A 503 is an unknown outcome from
// outside (the service may or may not have processed it).
func (o *opRun) kind(status int, h http.Header, body []byte) history.Kind {
	e := &Exchange{Status: status, respHeaderRaw: h, respBodyRaw: body}
	switch {
	case status == 0:
		return history.KindUnknown
	case e.replayed():
		return history.KindReplay
	case status == http.StatusConflict:
		return history.KindConflict
	case o.exp.mismatch.judge(e) == "":
		return history.KindMismatch
	case status == http.StatusInternalServerError:
		return history.KindFailed
	case status >= 500:
		return history.KindUnknown
	case status/100 == 2 || (status/100 == 4 && o.exp.final(status)):
		// An execution: a success, or a 4xx the declared replay.statuses store (a stateful
		// operation's refusal of a resource whose state changed is one).
		return history.KindOK
	case status/100 == 4:
		// A 4xx the contract does not store releases the key, as a failure does.
		return history.KindFailed
	}
	return history.KindOther
}

// upstreamExchange shows the service's answer the client never saw, for a report.
func upstreamExchange(label string, u upstream, sent *Exchange) *Exchange {
	e := &Exchange{Label: label, Via: "the service's answer, seen by the fault proxy", Status: u.status, respHeaderRaw: u.header, respBodyRaw: u.body,
		RespBody: show(u.body), Err: u.err, Start: u.call, Took: Duration(u.ret.Sub(u.call))}
	if sent != nil {
		e.Method, e.Target, e.Header, e.Body = sent.Method, sent.Target, sent.Header, sent.Body
	}
	for _, k := range sortedKeys(u.header) {
		if k == "Date" || k == "Content-Length" {
			continue
		}
		for _, v := range u.header[k] {
			e.RespHeader = append(e.RespHeader, HeaderKV{k, v})
		}
	}
	return e
}

// faultKey returns a fresh key for a fault check, or skips it.
func faultKey(c *checkRun) (string, bool) {
	return c.key()
}

// checkLostResponse: the service executes, the client's connection is reset before the
// answer; the retry replays that execution.
func checkLostResponse(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := faultKey(c)
	if !ok {
		return
	}
	req := o.req.keyed(key)
	t := c.newTape()
	before, has := c.effects(ctx)
	lost := t.send(ctx, 0, key, "v0", req, "reset", o.r.o.RequestTimeout)
	retry := c.retryUntilFinal(ctx, "the retry", c.wire(req, spellCanonical), 5*time.Second)
	t.sent = append(t.sent, sentAttempt{id: "retry", key: key, body: "v0", via: "direct", call: retry.Start, ret: retry.Start.Add(time.Duration(retry.Took)), e: retry})
	t.c.o.r.proxy.drain()
	ups := o.r.proxy.take(t.sent[0].id)
	// Put the service's answer back for the history.
	o.r.proxy.mu.Lock()
	o.r.proxy.seen[t.sent[0].id] = ups
	o.r.proxy.mu.Unlock()
	var served *Exchange
	if len(ups) == 1 && ups[0].status != 0 {
		served = upstreamExchange("the answer the client never got", ups[0], lost)
	}
	if u := o.usedUp(served, retry); u != nil {
		t.judge()
		c.skipUsedUp(ctx, "the lost request or its retry", u)
		return
	}
	if served != nil {
		if why := o.sameAnswer(served, retry); why != "" {
			c.fail([]*Exchange{lost, served, retry}, "the service answered %d, the connection was reset before the client got it, and the retry is no replay of that answer: %s", served.Status, why)
		}
	}
	t.judge()
	c.expectEffects(ctx, before, has, 1, "a lost answer and its retry", []*Exchange{lost, retry})
}

// checkLateDuplicate: a copy held on its way arrives after the retry executed; it replays.
func checkLateDuplicate(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := faultKey(c)
	if !ok {
		return
	}
	req := o.req.keyed(key)
	t := c.newTape()
	before, has := c.effects(ctx)
	hold := 800 * time.Millisecond
	late := t.send(ctx, 0, key, "v0", req, fmt.Sprintf("delay=%v", hold), 150*time.Millisecond)
	retry := c.retryUntilFinal(ctx, "the retry after giving up", c.wire(req, spellCanonical), 5*time.Second)
	t.sent = append(t.sent, sentAttempt{id: "retry", key: key, body: "v0", via: "direct", call: retry.Start, ret: retry.Start.Add(time.Duration(retry.Took)), e: retry})
	o.r.proxy.drain()
	ups := o.r.proxy.take(t.sent[0].id)
	o.r.proxy.mu.Lock()
	o.r.proxy.seen[t.sent[0].id] = ups
	o.r.proxy.mu.Unlock()
	var arrived *Exchange
	if len(ups) == 1 {
		arrived = upstreamExchange("the held copy, when it arrived", ups[0], late)
	}
	if u := o.usedUp(retry, arrived); u != nil {
		t.judge()
		c.skipUsedUp(ctx, "the retry or the late copy", u)
		return
	}
	if retry.ok() && !retry.replayed() && retry.Status < 500 && arrived != nil {
		if why := o.sameAnswer(retry, arrived); why != "" && arrived.Status != http.StatusConflict {
			c.fail([]*Exchange{late, retry, arrived}, "a copy that arrived after the retry executed is no replay of it: %s", why)
		}
	}
	t.judge()
	c.expectEffects(ctx, before, has, 1, "a late copy and its retry", []*Exchange{retry})
}

// checkTwoConnections: one request delivered on two connections at once executes once.
func checkTwoConnections(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := faultKey(c)
	if !ok {
		return
	}
	req := o.req.keyed(key)
	t := c.newTape()
	before, has := c.effects(ctx)
	w := req
	if o.r.o.DelayHeader != nil {
		w = req.clone()
		w.header = append(w.header, headerFields(o.r.o.DelayHeader)...)
	}
	sent := t.send(ctx, 0, key, "v0", w, "twice", o.r.o.RequestTimeout)
	o.r.proxy.drain()
	ups := o.r.proxy.take(t.sent[0].id)
	o.r.proxy.mu.Lock()
	o.r.proxy.seen[t.sent[0].id] = ups
	o.r.proxy.mu.Unlock()
	var execs []*Exchange
	var all []*Exchange
	for i, u := range ups {
		e := upstreamExchange(fmt.Sprintf("connection %d", i+1), u, sent)
		all = append(all, e)
		if k := o.kind(u.status, u.header, u.body); k == history.KindOK {
			execs = append(execs, e)
		} else if k == history.KindConflict {
			if why := o.exp.inFlight.judge(e); why != "" {
				c.fail([]*Exchange{e}, "the copy on the second connection met the first in flight: %s", why)
			}
		}
	}
	if len(execs) > 1 {
		c.fail(all, "the request delivered on two connections at once executed twice (%d and %d, neither a replay)", execs[0].Status, execs[1].Status)
	}
	if len(execs) == 0 && len(ups) > 0 && allInFlight(o, ups) {
		// Both copies met each other in flight and neither ran: 409 is not an answer but a
		// "retry later", so the client's retry, after Retry-After, is what must execute once.
		c.note("both copies were answered 409 in flight; the client's retry was sent")
		retryInFlight(ctx, t, key, req, o.r.o.RequestTimeout)
	}
	t.judge()
	if u := o.usedUp(all...); u != nil {
		c.skipUsedUp(ctx, "a connection's copy", u)
		return
	}
	c.expectEffects(ctx, before, has, 1, "one request on two connections", all)
}

// allInFlight reports whether every answer the service gave is the contract's 409 in flight.
func allInFlight(o *opRun, ups []upstream) bool {
	for _, u := range ups {
		if o.kind(u.status, u.header, u.body) != history.KindConflict {
			return false
		}
	}
	return true
}

// retryInFlight sends req under key straight to the service as a client retrying an answer
// 409 in flight would: after its Retry-After (at most one second a time), until the answer is
// something else, for at most ten tries. The attempts go on the tape, into the history.
func retryInFlight(ctx context.Context, t *tape, key string, req *request, timeout time.Duration) {
	for range 10 {
		e := t.send(ctx, 0, key, "v0", req, "", timeout)
		if !e.ok() || e.Status != http.StatusConflict || !waitRetryAfter(ctx, e) {
			return
		}
	}
}

// stormPlan is the size of a retry storm.
func (o *opRun) stormPlan() (keys, clients, maxAttempts int) {
	if o.r.o.Short {
		return 2, 3, 12
	}
	return 6, 5, 30
}

// checkStorm: clients retry through random faults until they get a definitive answer; every
// key's history must be linearizable and executions equal the keys confirmed.
func checkStorm(ctx context.Context, c *checkRun) {
	o := c.o
	keys, clients, maxAttempts := o.stormPlan()
	ch, canChange := pickChange(o, o.req)
	t := c.newTape()
	before, has := c.effects(ctx)
	var wg sync.WaitGroup
	var unsettled sync.Map
	// answers are the storm's answers, for the used-up rule (opRun.usedUp).
	var answersMu sync.Mutex
	var answers []*Exchange
	logical := 0
	// Every key's request is made before any client starts: a fresh parameter's resource
	// (FreshParams) is made with the effects oracle read around it, which must not see the
	// storm's executions.
	keyList := make([]string, keys)
	bases := make([]*request, keys)
	for k := range keys {
		key, ok := c.key()
		if !ok {
			return
		}
		keyList[k], bases[k] = key, o.req.keyed(key)
	}
	for k := 0; k < keys; k++ {
		key, base := keyList[k], bases[k]
		changed := base
		if canChange {
			changed = base.clone()
			ch.apply(changed)
		}
		for cl := 0; cl < clients; cl++ {
			l := logical
			logical++
			req, body := base, "v0"
			if cl == clients-1 && canChange {
				req, body = changed, "v1"
			}
			rng := rand.New(rand.NewPCG(o.r.o.Seed+uint64(l), uint64(k)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for a := 0; a < maxAttempts && ctx.Err() == nil; a++ {
					fault, patience := "", o.r.o.RequestTimeout
					switch rng.IntN(5) {
					case 0:
						fault = "reset"
					case 1:
						fault, patience = "delay=300ms", 100*time.Millisecond
					case 2:
						fault = "twice"
					}
					e := t.send(ctx, l, key, body, req, fault, patience)
					if e.ok() {
						answersMu.Lock()
						answers = append(answers, e)
						answersMu.Unlock()
						if o.usedUp(e) != nil {
							return // the resource is used up: the service's last word (judged below)
						}
						switch o.kind(e.Status, e.respHeaderRaw, e.respBodyRaw) {
						case history.KindOK, history.KindReplay, history.KindMismatch:
							return
						case history.KindOther:
							unsettled.Store(l, fmt.Sprintf("it got %d, an answer the contract has no place for (a mismatch is %d): %s", e.Status, o.exp.mismatch.status, oneLine(e.RespBody)))
							return
						}
					}
					time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
				}
				unsettled.Store(l, "no definitive answer after retries")
			}()
		}
	}
	wg.Wait()
	t.judge()
	unsettled.Range(func(k, v any) bool {
		c.fail(nil, "client %v of the storm ended without a definitive answer: %v", k, v)
		return false
	})
	if u := o.usedUp(answers...); u != nil {
		c.skipUsedUp(ctx, "a storm client's request", u)
		return
	}
	c.expectEffects(ctx, before, has, int64(keys), fmt.Sprintf("a storm on %d keys", keys), nil)
}
