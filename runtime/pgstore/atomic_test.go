package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// docs/design.md section 1, rows New and Replay; section 5 replay fidelity; on PostgreSQL, under each
// claim strategy.
func TestAtomicNewThenReplay(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withStrategy(s.strategy))
			h := e.atomicHandler(payOp())
			first := serve(h, req("t1", key1, body100))
			if first.Code != 201 || first.Header().Get("Location") == "" || first.Header().Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
			}
			if first.Header().Get("Set-Cookie") == "" {
				t.Error("the first response must carry the handler's Set-Cookie (only the stored copy drops it)")
			}
			for i := range 2 {
				again := serve(h, req("t1", key1, body100))
				if again.Code != 201 || again.Body.String() != first.Body.String() {
					t.Fatalf("replay %d: %d %s, want 201 %s", i, again.Code, again.Body, first.Body)
				}
				hd := again.Header()
				if hd.Get(runtime.HeaderReplayed) != "true" || hd.Get("Location") != first.Header().Get("Location") ||
					hd.Get("Content-Type") != "application/json" {
					t.Errorf("replay headers: %v", hd)
				}
				for _, never := range []string{"Set-Cookie", "Date", "X-Internal"} {
					if hd.Get(never) != "" {
						t.Errorf("replay carries %s", never)
					}
				}
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments = %d, want 1", n)
			}
			if e.obs.get(runtime.OutcomeExecuted) != 1 || e.obs.get(runtime.OutcomeReplayed) != 2 {
				t.Errorf("outcomes %v", e.obs)
			}
		})
	}
}

// docs/design.md section 1, row Mismatch: 422, nothing runs, nothing changes.
func TestAtomicMismatch(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withStrategy(s.strategy))
			h := e.atomicHandler(payOp())
			first := serve(h, req("t1", key1, body100))
			w := serve(h, req("t1", key1, `{"amount":200}`))
			if w.Code != 422 || problemType(t, w) != runtime.ProblemPayloadMismatch || w.Header().Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("mismatch: %d %s", w.Code, w.Body)
			}
			again := serve(h, req("t1", key1, body100))
			if again.Body.String() != first.Body.String() || again.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatalf("the original must still replay: %d %s", again.Code, again.Body)
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments = %d", n)
			}
		})
	}
}

// shared/cases 020: a key names one operation per tenant; scope operation opts out.
func TestKeyReusedOnAnotherOperation(t *testing.T) {
	e := newEnv(t, nil)
	pay := payOp()
	other := payOp()
	other.ID = "createOrder"
	if w := serve(e.atomicHandler(pay), req("t1", key1, body100)); w.Code != 201 {
		t.Fatal(w.Code)
	}
	w := serve(e.atomicHandler(other), req("t1", key1, body100))
	if w.Code != 422 || problemType(t, w) != runtime.ProblemPayloadMismatch {
		t.Fatalf("other operation: %d %s", w.Code, w.Body)
	}
	perOp := payOp()
	perOp.ID = "createRefund"
	perOp.Scope = runtime.ScopeOperation
	if w := serve(e.atomicHandler(perOp), req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Fatalf("scope operation: %d %s", w.Code, w.Body)
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments = %d, want 2", n)
	}
	var stored int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records WHERE operation = 'createRefund' AND key_id = $1",
		keyID("t1", "createRefund "+key1)).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("scope operation key: %d records under the key \"createRefund %s\" (%v), want 1", stored, key1, err)
	}
}

// shared/cases 010: tenants never share keys.
func TestTenantsDoNotShareKeys(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	serve(h, req("t1", key1, body100))
	w := serve(h, req("t2", key1, `{"amount":999}`))
	if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" || !strings.Contains(w.Body.String(), "999") {
		t.Fatalf("t2: %d %s", w.Code, w.Body)
	}
	if e.payments("t1") != 1 || e.payments("t2") != 1 {
		t.Fatal("each tenant pays once")
	}
}

// docs/design.md section 2 replay.statuses on PostgreSQL: 5xx, panics, errors and 408/409/425/429 roll
// the handler's writes back with the claim; a 402 is stored with them.
func TestAtomicNonFinalOutcomesRelease(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withStrategy(s.strategy))
			h := e.atomicHandler(payOp())
			for i, fail := range []string{"500", "503", "408", "409", "425", "429", "panic", "error"} {
				key := key1 + "-" + fail
				w := serve(h, req("t1", key, body100, "X-Fail", fail))
				if w.Code < 400 || w.Header().Get(runtime.HeaderReplayed) != "" {
					t.Fatalf("%s: %d", fail, w.Code)
				}
				if e.payments("t1") != i {
					t.Fatalf("%s: the handler's write must roll back", fail)
				}
				w = serve(h, req("t1", key, body100))
				if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
					t.Fatalf("%s: retry must run: %d %s", fail, w.Code, w.Body)
				}
			}
			w := serve(h, req("t1", "k-decline-000000001", body100, "X-Fail", "402"))
			again := serve(h, req("t1", "k-decline-000000001", body100))
			if w.Code != 402 || again.Code != 402 || again.Header().Get(runtime.HeaderReplayed) != "true" || again.Body.String() != w.Body.String() {
				t.Fatalf("decline: %d then %d %v", w.Code, again.Code, again.Header())
			}
			if e.obs.get(runtime.OutcomeReleased) != 8 || e.payments("t1") != 9 {
				t.Errorf("released = %d, payments %d", e.obs.get(runtime.OutcomeReleased), e.payments("t1"))
			}
		})
	}
}

// docs/design.md section 5 on PostgreSQL: a body above limits.response is delivered, not stored; the
// replay has the status and headers, an empty body, and Idempotent-Replay-Body: omitted.
func TestResponseAboveLimit(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.ResponseLimit = 100
	h := e.atomicHandler(op)
	w := serve(h, req("t1", key1, body100, "X-Big", "1000"))
	if w.Code != 201 || w.Body.Len() != 1000 {
		t.Fatalf("first: %d %d bytes", w.Code, w.Body.Len())
	}
	again := serve(h, req("t1", key1, body100))
	if again.Code != 201 || again.Body.Len() != 0 || again.Header().Get(runtime.HeaderReplayBody) != "omitted" ||
		again.Header().Get("Location") == "" || again.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %q %v", again.Code, again.Body, again.Header())
	}
	if e.payments("t1") != 1 {
		t.Fatal("ran twice")
	}
}

// docs/design.md section 1, rows New, In-flight and Replay: 50 goroutines with one key make exactly one
// business write; the others get 409 in-flight with Retry-After, or a replay.
func TestAtomicStormOneWrite(t *testing.T) {
	forClaimLocks(t, testAtomicStormOneWrite)
}

func testAtomicStormOneWrite(t *testing.T, tweak func(*setup)) {
	e := newEnv(t, tweak)
	h := e.atomicHandler(payOp())
	const n = 50
	var wg sync.WaitGroup
	res := make([]*responseSummary, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i] = summarize(t, serve(h, req("t1", key1, body100, "X-Delay", "300ms")))
		}()
	}
	close(start)
	wg.Wait()
	created, conflicts, replays := 0, 0, 0
	for _, r := range res {
		switch {
		case r.replayed:
			replays++
		case r.status == 201:
			created++
		case r.status == 409 && r.problem == runtime.ProblemInFlight && r.retryAfter != "":
			conflicts++
		default:
			t.Errorf("unexpected answer %+v", r)
		}
	}
	if created != 1 || e.payments("t1") != 1 {
		t.Fatalf("created %d, payments %d; want exactly one", created, e.payments("t1"))
	}
	t.Logf("storm: 1 created, %d conflicts, %d replays", conflicts, replays)
	if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Fatalf("after the storm: %d", w.Code)
	}
}

// Operation.Wait: a duplicate that waits long enough replays instead of getting 409.
func TestAtomicBoundedWaitReplays(t *testing.T) {
	forClaimLocks(t, testAtomicBoundedWaitReplays)
}

func testAtomicBoundedWaitReplays(t *testing.T, tweak func(*setup)) {
	e := newEnv(t, tweak)
	op := payOp()
	op.Wait = 5 * time.Second
	h := e.atomicHandler(op)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	// The duplicate starts once the first request holds the claim: its handler has written its
	// payment and waits in the open transaction (with a wait, every strategy claims before the
	// handler runs).
	g := e.gate("first")
	g.wait(t)
	dup := make(chan *responseSummary)
	go func() { dup <- summarize(t, serve(h, req("t1", key1, body100))) }()
	// Let the first finish only once the duplicate is waiting for it.
	eventually(t, "the duplicate to wait for the claim", func() bool { return e.st.WaitingForTest() == 1 })
	g.open()
	if s := <-dup; s.status != 201 || !s.replayed {
		t.Fatalf("waiting duplicate: %+v", s)
	}
	if <-done != 201 || e.payments("t1") != 1 {
		t.Fatal("first request")
	}
}

// shared/cases 009: a duplicate while the first runs gets 409 at once (no wait by default).
func TestAtomicConflictDoesNotWait(t *testing.T) {
	forClaimLocks(t, testAtomicConflictDoesNotWait)
}

func testAtomicConflictDoesNotWait(t *testing.T, tweak func(*setup)) {
	e := newEnv(t, tweak)
	h := e.atomicHandler(payOp())
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := e.gate("first")
	g.wait(t)
	start := time.Now()
	w := serve(h, req("t1", key1, body100))
	took := time.Since(start)
	g.open()
	if w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("duplicate: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if took > 500*time.Millisecond {
		t.Fatalf("the duplicate waited %v for the first request", took)
	}
	if <-done != 201 || e.payments("t1") != 1 {
		t.Fatal("first request")
	}
}

// Concurrent requests with distinct keys never get 409: the claim lock only ever meets a
// concurrent claim of the same key.
func TestAtomicDistinctKeysInParallel(t *testing.T) {
	forClaimLocks(t, testAtomicDistinctKeysInParallel)
}

func testAtomicDistinctKeysInParallel(t *testing.T, tweak func(*setup)) {
	e := newEnv(t, func(c *setup) {
		tweak(c)
		// Without advisory locks ConflictTimeout (50 ms by default there) bounds every lock
		// wait of a claim, and under a loaded machine an INSERT of a distinct key can wait that
		// long on the index or the relation's extension, which is not a claim of its key. The
		// property is that distinct keys never meet each other's claim: a real meeting would
		// still wait the whole timeout and answer 409.
		c.store.ConflictTimeout = 5 * time.Second
	})
	h := e.atomicHandler(payOp())
	const n = 50
	codes := concurrently(n, func(i int) int {
		return serve(h, req("t1", fmt.Sprintf("k-distinct-%08d-x", i), body100, "X-Delay", "50ms")).Code
	})
	for i, c := range codes {
		if c != 201 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if e.payments("t1") != n {
		t.Fatalf("payments %d", e.payments("t1"))
	}
}

// A claim that holds only the advisory lock (ClaimWithStatement, ClaimReadFirst) inserts its
// record completed at the end. If a row for the key appears meanwhile from a writer that
// bypassed the lock (a replica with NoAdvisoryLocks, a lease-mode operation reusing the key), the
// completion must fail and roll the handler's writes back, and the request is answered from that
// row, as if it had come after it: here 422, the key belongs to another operation.
func TestDeferredClaimMeetsForeignRow(t *testing.T) {
	for _, s := range []struct {
		name     string
		strategy pgstore.ClaimStrategy
	}{{"WithStatement", pgstore.ClaimWithStatement{}}, {"ReadFirst", pgstore.ClaimReadFirst{}}} {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, withStrategy(s.strategy))
			h := e.atomicHandler(payOp())
			const key = "k-deferred-foreign-0001"
			done := make(chan int)
			go func() { done <- serve(h, req("t1", key, body100, "X-Hold", "first")).Code }()
			g := e.gate("first")
			g.wait(t)
			if err := e.insertRecord(context.Background(), testRecord{scope: "t1", key: key, operation: "otherOperation",
				token: 1, expiresIn: time.Hour}); err != nil {
				t.Fatal(err)
			}
			g.open()
			if code := <-done; code != 422 {
				t.Errorf("first request: %d, want 422 (answered from the row that took the key)", code)
			}
			if n := e.payments("t1"); n != 0 {
				t.Errorf("payments %d, want 0: the handler's write must roll back with the record", n)
			}
			if w := serve(h, req("t1", key, body100)); w.Code != 422 {
				t.Errorf("retry: %d, want 422 (the key belongs to the other operation)", w.Code)
			}
		})
	}
}
