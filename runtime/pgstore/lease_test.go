package pgstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/store"
)

// provider is a fake downstream payment provider that deduplicates on the key it is given, as a
// real one does; count is the charges it really made.
type provider struct {
	mu   sync.Mutex
	seen map[string]bool
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
	p.seen[key] = true
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
	return len(p.seen)
}

// leaseRecord returns the live record of key in scope t1, by the database's clock.
func (e *env) leaseRecord(key string) (store.Record, bool) {
	e.t.Helper()
	rec, found, err := e.st.Get(context.Background(), store.ID{Scope: "t1", Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, found
}

// docs/design.md section 4, lease mode: new, replay, 409 while running (Retry-After: the lease's
// remaining time), 422 while running with another body (the record is visible), and one
// provider call.
func TestLeaseNewConflictReplay(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	op := leaseOp()
	op.Lease = 5 * time.Second // long enough that no retry here takes over
	h := e.leaseHandler(op, p)
	first := make(chan *responseSummary)
	go func() { first <- summarize(t, serve(h, req("t1", key1, body100, "X-Hold", "call"))) }()
	g := e.gate("call")
	g.wait(t)
	w := serve(h, req("t1", key1, body100))
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight || ra < 1 || ra > 5 {
		t.Fatalf("in flight: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = serve(h, req("t1", key1, `{"amount":5}`))
	if w.Code != 422 || problemType(t, w) != runtime.ProblemPayloadMismatch {
		t.Fatalf("mismatch in flight: %d %s", w.Code, w.Body)
	}
	g.open()
	if s := <-first; s.status != 201 || s.replayed {
		t.Fatalf("first: %+v", s)
	}
	w = serve(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "true" || w.Header().Get("Location") == "" {
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
		if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
			t.Fatalf("%s retry: %d %s", fail, w.Code, w.Body)
		}
	}
	if e.payments("t1") != 3 || p.count() != 3 {
		t.Fatalf("payments %d, provider calls %d; want 3 and 3", e.payments("t1"), p.count())
	}
}

// Lease takeover and fencing: after the lease ends (by the database clock), the same request
// takes over; the zombie's completion finds its token replaced (lease_lost) and the record
// keeps the new owner's result.
func TestLeaseTakeoverFencesZombie(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	zombie := make(chan *responseSummary)
	go func() { zombie <- summarize(t, serve(h, req("t1", key1, body100, "X-Hold", "zombie"))) }()
	g := e.gate("zombie")
	g.wait(t)
	if w := serve(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body while leased: %d", w.Code)
	}
	eventually(t, "the 500ms lease to end", func() bool {
		rec, found := e.leaseRecord(key1)
		return found && rec.LeaseLeft <= 0
	})
	if w := serve(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body after the lease: %d, want 422 (only the same request takes over)", w.Code)
	}
	owner := serve(h, req("t1", key1, body100))
	if owner.Code != 201 || owner.Header().Get(runtime.HeaderReplayed) != "" {
		t.Fatalf("takeover: %d %s", owner.Code, owner.Body)
	}
	if rec, _ := e.leaseRecord(key1); rec.Token != 2 {
		t.Errorf("fencing token after one takeover: %d, want 2", rec.Token)
	}
	g.open()
	z := <-zombie
	if z.status != 409 || z.problem != runtime.ProblemInFlight {
		t.Fatalf("zombie: %+v", z)
	}
	replay := serve(h, req("t1", key1, body100))
	if replay.Body.String() != owner.Body.String() || replay.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Fatalf("the record must hold the new owner's response: %s vs %s", replay.Body, owner.Body)
	}
	if e.payments("t1") != 1 || p.count() != 1 {
		t.Fatalf("payments %d, provider calls %d; want 1 and 1", e.payments("t1"), p.count())
	}
	if e.obs.get(runtime.OutcomeTakeover) != 1 || e.obs.get(runtime.OutcomeLeaseLost) != 1 {
		t.Fatalf("outcomes %v", e.obs)
	}
}

// Extend (heartbeat) keeps the claim past its lease: a retry after the original 500ms lease
// still gets 409, not a takeover.
func TestLeaseExtend(t *testing.T) {
	e := newEnv(t, nil)
	p := &provider{}
	h := e.leaseHandler(leaseOp(), p)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Extend", "1", "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	// Past the original lease by the database clock (the extension came before the gate).
	eventually(t, "the original lease to end", func() bool {
		var past bool
		if err := e.pool.QueryRow(context.Background(), `SELECT now() > created_at + interval '600 milliseconds'
			FROM idempotency_records WHERE key_id = $1`, keyID("t1", key1)).Scan(&past); err != nil {
			t.Fatal(err)
		}
		return past
	})
	w := serve(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight {
		t.Fatalf("extended lease: %d %s, want 409", w.Code, w.Body)
	}
	// The extended lease has at most 1.4s left: Retry-After rounds it up (2), or to 1 when this
	// test ran slowly; never 0.
	if ra := w.Header().Get("Retry-After"); ra != "2" && ra != "1" {
		t.Errorf("Retry-After %q, want the lease's remaining time in whole seconds", ra)
	}
	g.open()
	if got := <-done; got != 201 {
		t.Fatalf("first: %d", got)
	}
	if e.obs.get(runtime.OutcomeTakeover) != 0 || p.count() != 1 || e.payments("t1") != 1 {
		t.Fatal("an extended lease was taken over")
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
		case r.replayed, r.status == 409 && r.problem == runtime.ProblemInFlight && r.retryAfter != "":
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
	op.Wait = 10 * time.Second
	op.Lease = 10 * time.Second
	p := &provider{}
	h := e.leaseHandler(op, p)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	dup := make(chan *responseSummary)
	go func() { dup <- summarize(t, serve(h, req("t1", key1, body100))) }()
	// The first ends only once the duplicate has found it running (one claim each, then more
	// polls).
	eventually(t, "the duplicate to poll", func() bool { return e.obs.claimCount() >= 3 })
	g.open()
	if s := <-dup; s.status != 201 || !s.replayed {
		t.Fatalf("waiting duplicate: %+v", s)
	}
	if <-done != 201 || p.count() != 1 || e.payments("t1") != 1 {
		t.Fatal("first request")
	}
}

func (o *recordingObserver) claimCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.claims
}
