package runtime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// provider is a fake downstream payment provider that deduplicates on the key it is given, as a
// real one does; calls counts the charges it really made.
type provider struct {
	mu    sync.Mutex
	seen  map[string]bool
	calls int
	// db, when set, keeps the charges in table provider_calls, so that they survive a process
	// (the crash tests kill the process that made the first call).
	db *pgxpool.Pool
}

func (p *provider) charge(key string) {
	if p.db != nil {
		ctx := context.Background()
		if _, err := p.db.Exec(ctx, "CREATE TABLE IF NOT EXISTS provider_calls (key text PRIMARY KEY)"); err != nil {
			panic(err)
		}
		if _, err := p.db.Exec(ctx, "INSERT INTO provider_calls VALUES ($1) ON CONFLICT DO NOTHING", key); err != nil {
			panic(err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if !p.seen[key] {
		p.seen[key] = true
		p.calls++
	}
}

func (p *provider) count() int {
	if p.db != nil {
		var n int
		if err := p.db.QueryRow(context.Background(), "SELECT count(*) FROM provider_calls").Scan(&n); err != nil {
			panic(err)
		}
		return n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func leaseOp() *Operation {
	op := payOp()
	op.ID = "createProviderCharge"
	op.Mode = Lease
	op.Lease = 500 * time.Millisecond
	return op
}

// leaseHandler calls the provider in the call phase (X-Delay sleeps after the call, X-Fail fails
// after it), then writes one payments row in the completion.
func (e *env) leaseHandler(op *Operation, p *provider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x, ok := e.rt.Begin(w, r, op)
		if !ok {
			return
		}
		var body payBody
		_ = jsonUnmarshal(x.Body(), &body)
		x.RunLease(x.HeaderKey(), testFingerprint(op, x.Body()), func(ctx context.Context, l *LeaseHandle) (CompleteFunc, error) {
			p.charge(l.ProviderKey("charge"))
			signal(r)
			if r.Header.Get("X-Extend") != "" {
				if err := l.Extend(2 * time.Second); err != nil {
					return nil, err
				}
			}
			if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
				time.Sleep(d)
			}
			switch r.Header.Get("X-Fail") {
			case "error":
				return nil, errors.New("provider said no")
			case "panic":
				panic("call phase panic")
			}
			return func(ctx context.Context, tx pgx.Tx) (Response, error) {
				var id int64
				if err := tx.QueryRow(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2) RETURNING id",
					x.Scope(), body.Amount).Scan(&id); err != nil {
					return Response{}, err
				}
				r.Header.Del("X-Delay")
				return businessAnswer(ctx, r, id, body.Amount)
			}, nil
		})
	})
}

// DESIGN section 4, lease mode: new, replay, 409 while running, 422 while running with another
// body (the record is visible), and one provider call.
func TestLeaseNewConflictReplay(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	first := make(chan *responseSummary)
	go func() {
		first <- summarize(t, serve(h, req("t1", key1, body100, "X-Delay", "300ms")))
	}()
	time.Sleep(100 * time.Millisecond)
	w := serve(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("in flight: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = serve(h, req("t1", key1, `{"amount":5}`))
	if w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch {
		t.Fatalf("mismatch in flight: %d %s", w.Code, w.Body)
	}
	if s := <-first; s.status != 201 || s.replayed {
		t.Fatalf("first: %+v", s)
	}
	w = serve(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" || w.Header().Get("Location") == "" {
		t.Fatalf("replay: %d %v", w.Code, w.Header())
	}
	if e.payments("t1") != 1 || p.count() != 1 {
		t.Fatalf("payments %d, provider calls %d", e.payments("t1"), p.count())
	}
}

// shared/cases 024: a failed lease handler releases the key; the retry runs again and the
// provider's deduplication on the derived key prevents a second charge.
func TestLeaseFailureReleases(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	for _, fail := range []string{"503", "error", "panic"} {
		key := key1 + fail
		w := serve(h, req("t1", key, body100, "X-Fail", fail))
		if w.Code < 500 {
			t.Fatalf("%s: %d", fail, w.Code)
		}
		w = serve(h, req("t1", key, body100))
		if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s retry: %d %s", fail, w.Code, w.Body)
		}
	}
	if e.payments("t1") != 3 || p.count() != 3 {
		t.Fatalf("payments %d, provider calls %d; want 3 and 3", e.payments("t1"), p.count())
	}
}

// Lease takeover and fencing: after the lease ends, the same request takes over; the zombie's
// completion fails its compare-and-swap (lease_lost) and the record keeps the new owner's result.
func TestLeaseTakeoverFencesZombie(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	zombie := make(chan *httptestResult)
	go func() {
		w := serve(h, req("t1", key1, body100, "X-Delay", "1200ms"))
		zombie <- &httptestResult{code: w.Code, problem: problemType(t, w)}
	}()
	time.Sleep(200 * time.Millisecond)
	if w := serve(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body while leased: %d", w.Code)
	}
	time.Sleep(500 * time.Millisecond) // the 500ms lease is over
	if w := serve(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body after the lease: %d, want 422 (only the same request takes over)", w.Code)
	}
	owner := serve(h, req("t1", key1, body100))
	if owner.Code != 201 || owner.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("takeover: %d %s", owner.Code, owner.Body)
	}
	z := <-zombie
	if z.code != 409 || z.problem != ProblemInFlight {
		t.Fatalf("zombie: %+v", z)
	}
	replay := serve(h, req("t1", key1, body100))
	if replay.Body.String() != owner.Body.String() || replay.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("the record must hold the new owner's response: %s vs %s", replay.Body, owner.Body)
	}
	if e.payments("t1") != 1 || p.count() != 1 {
		t.Fatalf("payments %d, provider calls %d; want 1 and 1", e.payments("t1"), p.count())
	}
	if e.obs.get(OutcomeTakeover) != 1 || e.obs.get(OutcomeLeaseLost) != 1 {
		t.Fatalf("outcomes %v", e.obs.outcomes)
	}
}

type httptestResult struct {
	code    int
	problem string
}

// Extend (heartbeat) keeps the claim past its lease: a retry after the original 500ms lease
// still gets 409, not a takeover.
func TestLeaseExtend(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Extend", "1", "X-Delay", "1s")).Code }()
	time.Sleep(700 * time.Millisecond)
	w := serve(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight {
		t.Fatalf("extended lease: %d %s, want 409", w.Code, w.Body)
	}
	// The extended lease has about 1.35s left: Retry-After rounds it up (2), or to 1 when this
	// test ran slowly; never 0.
	if ra := w.Header().Get("Retry-After"); ra != "2" && ra != "1" {
		t.Errorf("Retry-After %q, want the lease's remaining time in whole seconds", ra)
	}
	if got := <-done; got != 201 {
		t.Fatalf("first: %d", got)
	}
	if e.obs.get(OutcomeTakeover) != 0 || p.count() != 1 || e.payments("t1") != 1 {
		t.Fatal("an extended lease was taken over")
	}
}

// ProviderKey and DeriveID depend on (scope, key, label) only, and the secret when set.
func TestLeaseDerivations(t *testing.T) {
	in := &claimInput{scope: "t1", key: key1}
	a := &LeaseHandle{in: in, token: 1}
	b := &LeaseHandle{in: &claimInput{scope: "t1", key: key1}, token: 7}
	if a.ProviderKey("charge") != b.ProviderKey("charge") || a.DeriveID("payment") != b.DeriveID("payment") {
		t.Fatal("derivations must not depend on the attempt")
	}
	if len(a.ProviderKey("charge")) != 64 {
		t.Fatal("provider key length")
	}
	others := []*LeaseHandle{
		{in: &claimInput{scope: "t2", key: key1}},
		{in: &claimInput{scope: "t1", key: key1 + "x"}},
		{in: in, secret: []byte("s")},
		// Framing: moving a byte from scope to key must change the result.
		{in: &claimInput{scope: "t", key: "1" + key1}},
	}
	for i, o := range others {
		if o.ProviderKey("charge") == a.ProviderKey("charge") {
			t.Errorf("variant %d collides", i)
		}
	}
	if a.ProviderKey("charge") == a.ProviderKey("refund") {
		t.Error("labels must separate keys")
	}
	id := a.DeriveID("payment")
	if len(id) != 36 || id[14] != '8' {
		t.Errorf("DeriveID %q is not a version 8 UUID", id)
	}
}

// 50 goroutines with one key in lease mode: one provider call, one business write; the others
// get 409 in-flight or, once the first completed, a replay. Claims commit at once, so this storm
// exercises the READ COMMITTED re-read path (a claim that waited on another's insert sees
// neither its own row nor the winner's).
func TestLeaseStormOneWrite(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	const n = 50
	res := make([]*responseSummary, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i] = summarize(t, serve(h, req("t1", key1, body100, "X-Delay", "100ms")))
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for _, r := range res {
		switch {
		case r.status == 201 && !r.replayed:
			created++
		case r.replayed, r.status == 409 && r.problem == ProblemInFlight && r.retryAfter != "":
		default:
			t.Errorf("unexpected %+v", r)
		}
	}
	if created != 1 || e.payments("t1") != 1 || p.count() != 1 {
		t.Fatalf("created %d, payments %d, provider calls %d", created, e.payments("t1"), p.count())
	}
}

// concurrency.wait in lease mode: a duplicate polls the visible record and replays when the first
// finishes within the wait.
func TestLeaseBoundedWaitReplays(t *testing.T) {
	e := newEnv(t, nil)
	op := leaseOp()
	op.Wait = 2 * time.Second
	p := &provider{}
	h := e.leaseHandler(op, p)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Delay", "300ms")).Code }()
	time.Sleep(100 * time.Millisecond)
	w := serve(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("waiting duplicate: %d %s", w.Code, w.Body)
	}
	if <-done != 201 || p.count() != 1 {
		t.Fatal("first request")
	}
}
