package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const body100 = `{"amount":100}`

// DESIGN section 1, rows New and Replay; section 5 replay fidelity.
func TestAtomicNewThenReplay(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())

	first := serve(h, req("t1", key1, body100))
	if first.Code != 201 || first.Header().Get("Location") == "" || first.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
	}
	if first.Header().Get("Set-Cookie") == "" {
		t.Error("the first response must carry the handler's Set-Cookie (only the stored copy drops it)")
	}
	for i := 0; i < 2; i++ {
		again := serve(h, req("t1", key1, body100))
		if again.Code != 201 || again.Body.String() != first.Body.String() {
			t.Fatalf("replay %d: %d %s, want 201 %s", i, again.Code, again.Body, first.Body)
		}
		hd := again.Header()
		if hd.Get(HeaderReplayed) != "true" || hd.Get("Location") != first.Header().Get("Location") ||
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
	if e.obs.get(OutcomeExecuted) != 1 || e.obs.get(OutcomeReplayed) != 2 {
		t.Errorf("outcomes %v", e.obs.outcomes)
	}
}

// DESIGN section 1, row Mismatch: 422, nothing runs, nothing changes.
func TestAtomicMismatch(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	first := serve(h, req("t1", key1, body100))
	w := serve(h, req("t1", key1, `{"amount":200}`))
	if w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("mismatch: %d %s", w.Code, w.Body)
	}
	again := serve(h, req("t1", key1, body100))
	if again.Body.String() != first.Body.String() || again.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("the original must still replay: %d %s", again.Code, again.Body)
	}
	if n := e.payments("t1"); n != 1 {
		t.Fatalf("payments = %d", n)
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
	// Same body, same key, another operation: the fingerprint differs, but even an equal one
	// must not replay another operation's response.
	w := serve(e.atomicHandler(other), req("t1", key1, body100))
	if w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch {
		t.Fatalf("other operation: %d %s", w.Code, w.Body)
	}
	perOp := payOp()
	perOp.ID = "createRefund"
	perOp.Scope = ScopeOperation
	if w := serve(e.atomicHandler(perOp), req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("scope operation: %d %s", w.Code, w.Body)
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments = %d, want 2", n)
	}
}

// shared/cases 010: tenants never share keys.
func TestTenantsDoNotShareKeys(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	serve(h, req("t1", key1, body100))
	w := serve(h, req("t2", key1, `{"amount":999}`))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" || !strings.Contains(w.Body.String(), "999") {
		t.Fatalf("t2: %d %s", w.Code, w.Body)
	}
	if e.payments("t1") != 1 || e.payments("t2") != 1 {
		t.Fatal("each tenant pays once")
	}
}

// DESIGN section 1, row missing/malformed key; section 2 key rules.
func TestKeyRules(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	cases := []struct {
		name    string
		r       *http.Request
		status  int
		problem string
	}{
		{"missing", req("t1", "", body100), 400, ProblemKeyMissing},
		{"empty", req("t1", "", body100, "Idempotency-Key", ""), 400, ProblemKeyInvalid},
		{"15 chars", req("t1", "short-key-15chr", body100), 400, ProblemKeyInvalid},
		{"256 chars", req("t1", strings.Repeat("k", 256), body100), 400, ProblemKeyInvalid},
		{"comma", req("t1", "abcdefgh,ijklmnopq", body100), 400, ProblemKeyInvalid},
		{"space", req("t1", "abcdefgh ijklmnopq", body100), 400, ProblemKeyInvalid},
		{"non-ascii", req("t1", "abcdefghijklmnopé", body100), 400, ProblemKeyInvalid},
		{"two lines", req("t1", "", body100, "Idempotency-Key", "abcdefghijklmnopq", "Idempotency-Key", "abcdefghijklmnopq"), 400, ProblemKeyInvalid},
		{"bad escape", req("t1", `"abcdefghij\klmnopq"`, body100), 400, ProblemKeyInvalid},
		{"16 chars", req("t1", "exactly-16-chars", body100), 201, ""},
		{"255 chars", req("t1", strings.Repeat("k", 255), body100), 201, ""},
	}
	for _, c := range cases {
		w := serve(h, c.r)
		if w.Code != c.status || (c.problem != "" && problemType(t, w) != c.problem) {
			t.Errorf("%s: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.problem)
		}
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments = %d, want 2 (refused requests run nothing)", n)
	}
	if e.obs.get(OutcomeKeyMissing) != 1 || e.obs.get(OutcomeKeyInvalid) != 8 {
		t.Errorf("outcomes %v", e.obs.outcomes)
	}
	// RFC 8941 sf-string: "abc" is the key abc, so it replays.
	w := serve(h, req("t1", `"exactly-16-chars"`, body100))
	if w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("quoted key: %d %v", w.Code, w.Header())
	}
	var total int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&total)
	if total != 2 {
		t.Fatalf("records = %d, want 2", total)
	}
}

// DESIGN section 4: scope, size and media type are refused in Begin, before any lookup.
func TestBeginRefusals(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.BodyLimit = 64
	h := e.atomicHandler(op)

	if w := serve(h, req("", key1, body100)); w.Code != 401 || problemType(t, w) != ProblemUnauthenticated {
		t.Errorf("no scope: %d %s", w.Code, w.Body)
	}
	big := `{"amount":1,"pad":"` + strings.Repeat("x", 100) + `"}`
	if w := serve(h, req("t1", key1, big)); w.Code != 413 || problemType(t, w) != ProblemBodyTooLarge {
		t.Errorf("declared length: %d %s", w.Code, w.Body)
	}
	r := req("t1", key1, big)
	r.ContentLength = -1 // chunked: the cap applies while reading
	if w := serve(h, r); w.Code != 413 || problemType(t, w) != ProblemBodyTooLarge {
		t.Errorf("streamed: %d %s", w.Code, w.Body)
	}
	r = req("t1", key1, body100)
	r.Header.Set("Content-Type", "text/plain")
	if w := serve(h, r); w.Code != 415 || problemType(t, w) != ProblemMediaTypeUnsupported {
		t.Errorf("media type: %d %s", w.Code, w.Body)
	}
	r = req("t1", key1, body100)
	r.Header.Set("Content-Type", "Application/JSON; charset=utf-8")
	if w := serve(h, r); w.Code != 201 {
		t.Errorf("media type with parameters: %d %s", w.Code, w.Body)
	}
	if w := serve(h, req("t1", key1+"x", `{"amount":-1}`)); w.Code != 400 || problemType(t, w) != ProblemBodyInvalid ||
		!strings.Contains(w.Body.String(), `"pointer":"/amount"`) {
		t.Errorf("body invalid: %d %s", w.Code, w.Body)
	}
	var n int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&n)
	if n != 1 {
		t.Fatalf("records = %d, want 1", n)
	}
	if e.obs.get(OutcomeUnauthorized) != 1 || e.obs.get(OutcomeBodyInvalid) != 4 {
		t.Errorf("outcomes %v", e.obs.outcomes)
	}
}

// DESIGN section 2 replay.statuses: 5xx, panics, errors and 408/409/425/429 release the key and
// roll the handler's writes back; a 402 is final, stored and replayed.
func TestAtomicNonFinalOutcomesRelease(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	for i, fail := range []string{"500", "503", "408", "409", "425", "429", "panic", "error"} {
		key := key1 + "-" + fail
		w := serve(h, req("t1", key, body100, "X-Fail", fail))
		if w.Code < 400 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s: %d", fail, w.Code)
		}
		if e.payments("t1") != i {
			t.Fatalf("%s: the handler's write must roll back", fail)
		}
		w = serve(h, req("t1", key, body100))
		if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s: retry must run: %d %s", fail, w.Code, w.Body)
		}
	}
	w := serve(h, req("t1", "k-decline-000000001", body100, "X-Fail", "402"))
	again := serve(h, req("t1", "k-decline-000000001", body100))
	if w.Code != 402 || again.Code != 402 || again.Header().Get(HeaderReplayed) != "true" || again.Body.String() != w.Body.String() {
		t.Fatalf("decline: %d then %d %v", w.Code, again.Code, again.Header())
	}
	if e.obs.get(OutcomeReleased) != 8 {
		t.Errorf("released = %d", e.obs.get(OutcomeReleased))
	}
}

// DESIGN section 5: a response body above limits.response is delivered, the record keeps status
// and headers, and the replay has an empty body marked omitted.
func TestResponseAboveLimit(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.ResponseLimit = 100
	h := e.atomicHandler(op)
	w := serve(h, req("t1", key1, body100, "X-Big", "1000"))
	if w.Code != 201 || w.Body.Len() != 1000 {
		t.Fatalf("first: %d %d bytes", w.Code, w.Body.Len())
	}
	again := serve(h, req("t1", key1, body100, "X-Big", "1000"))
	if again.Code != 201 || again.Body.Len() != 0 || again.Header().Get(HeaderReplayBody) != "omitted" ||
		again.Header().Get("Location") == "" || again.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %q %v", again.Code, again.Body, again.Header())
	}
	if e.payments("t1") != 1 {
		t.Fatal("ran twice")
	}
}

// Issue 7 item 10: 50 goroutines with one key make exactly one business write; the others get
// 409 in-flight with Retry-After, or a replay.
func TestAtomicStormOneWrite(t *testing.T) {
	forClaimLocks(t, testAtomicStormOneWrite)
}

// forClaimLocks runs test with advisory claim locks, taken with the handler's first statement
// (the default) and before the handler (ClaimReadFirst), and with the portable path.
func forClaimLocks(t *testing.T, test func(t *testing.T, tweak func(*Config))) {
	t.Run("advisory", func(t *testing.T) { test(t, nil) })
	t.Run("readfirst", func(t *testing.T) { test(t, func(c *Config) { c.ClaimStrategy = ClaimReadFirst }) })
	t.Run("portable", func(t *testing.T) { test(t, func(c *Config) { c.NoAdvisoryLocks = true }) })
}

func testAtomicStormOneWrite(t *testing.T, tweak func(*Config)) {
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
			w := serve(h, req("t1", key1, body100, "X-Delay", "300ms"))
			res[i] = summarize(t, w)
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
		case r.status == 409 && r.problem == ProblemInFlight && r.retryAfter != "":
			conflicts++
		default:
			t.Errorf("unexpected answer %+v", r)
		}
	}
	if created != 1 || e.payments("t1") != 1 {
		t.Fatalf("created %d, payments %d; want exactly one", created, e.payments("t1"))
	}
	t.Logf("storm: 1 created, %d conflicts, %d replays", conflicts, replays)
	if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("after the storm: %d", w.Code)
	}
}

type responseSummary struct {
	status     int
	replayed   bool
	problem    string
	retryAfter string
}

func summarize(t *testing.T, w *httptest.ResponseRecorder) *responseSummary {
	return &responseSummary{status: w.Code, replayed: w.Header().Get(HeaderReplayed) == "true",
		retryAfter: w.Header().Get("Retry-After"), problem: problemType(t, w)}
}

// Operation.Wait: a duplicate that waits long enough replays instead of getting 409.
func TestAtomicBoundedWaitReplays(t *testing.T) {
	forClaimLocks(t, testAtomicBoundedWaitReplays)
}

func testAtomicBoundedWaitReplays(t *testing.T, tweak func(*Config)) {
	e := newEnv(t, tweak)
	op := payOp()
	op.Wait = 5 * time.Second
	h := e.atomicHandler(op)
	done := make(chan int)
	go func() {
		done <- serve(h, req("t1", key1, body100, "X-Delay", "1s")).Code
	}()
	// The duplicate starts only once the first request holds the claim: its handler has written
	// its payment and sleeps in the open transaction (a fixed sleep here raced under load, and the
	// duplicate sometimes claimed first). Both lock strategies claim before the handler runs.
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var inHandler bool
		if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle in transaction'
			AND query LIKE 'INSERT INTO payments%')`).Scan(&inHandler); err != nil {
			t.Fatal(err)
		}
		if inHandler {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached its handler")
		}
	}
	w := serve(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("waiting duplicate: %d %s", w.Code, w.Body)
	}
	if <-done != 201 || e.payments("t1") != 1 {
		t.Fatal("first request")
	}
}

// shared/cases 009: a duplicate while the first runs gets 409 at once (no wait by default).
func TestAtomicConflictDoesNotWait(t *testing.T) {
	forClaimLocks(t, testAtomicConflictDoesNotWait)
}

func testAtomicConflictDoesNotWait(t *testing.T, tweak func(*Config)) {
	e := newEnv(t, tweak)
	h := e.atomicHandler(payOp())
	go serve(h, req("t1", key1, body100, "X-Delay", "1s"))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	w := serve(h, req("t1", key1, body100))
	took := time.Since(start)
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("duplicate: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if took > 500*time.Millisecond {
		t.Fatalf("the duplicate waited %v for the first request", took)
	}
}

// Logs never carry a raw key (DESIGN section 4): they show a short hash.
func TestLogsHashKeys(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	e := newEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	})
	h := e.atomicHandler(payOp())
	serve(h, req("t1", key1, body100, "X-Fail", "panic"))
	mu.Lock()
	logs := buf.String()
	mu.Unlock()
	if !strings.Contains(logs, "key_hash="+keyHash("t1", key1)) || strings.Contains(logs, key1) {
		t.Fatalf("logs: %s", logs)
	}
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Concurrent requests with distinct keys never get 409: the claim's short lock_timeout only ever
// meets a concurrent claim of the same key.
func TestAtomicDistinctKeysInParallel(t *testing.T) {
	forClaimLocks(t, testAtomicDistinctKeysInParallel)
}

func testAtomicDistinctKeysInParallel(t *testing.T, tweak func(*Config)) {
	e := newEnv(t, tweak)
	h := e.atomicHandler(payOp())
	const n = 50
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = serve(h, req("t1", fmt.Sprintf("k-distinct-%08d-x", i), body100, "X-Delay", "50ms")).Code
		}()
	}
	wg.Wait()
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
	for _, strategy := range []ClaimStrategy{ClaimWithStatement, ClaimReadFirst} {
		e := newEnv(t, func(c *Config) { c.ClaimStrategy = strategy })
		h := e.atomicHandler(payOp())
		const key = "k-deferred-foreign-0001"
		done := make(chan int)
		go func() { done <- serve(h, req("t1", key, body100, "X-Delay", "400ms")).Code }()
		time.Sleep(150 * time.Millisecond)
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO idempotency_records
			(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token, created_at, expires_at)
			VALUES ('t1', $1, 'otherOperation', '\x00', 1, 'running', 1, now(), now() + interval '1 hour')`, key); err != nil {
			t.Fatal(err)
		}
		if code := <-done; code != 422 {
			t.Errorf("strategy %d: first request: %d, want 422 (answered from the row that took the key)", strategy, code)
		}
		if n := e.payments("t1"); n != 0 {
			t.Errorf("strategy %d: payments %d, want 0: the handler's write must roll back with the record", strategy, n)
		}
		if w := serve(h, req("t1", key, body100)); w.Code != 422 {
			t.Errorf("strategy %d: retry: %d, want 422 (the key belongs to the other operation)", strategy, w.Code)
		}
	}
}
