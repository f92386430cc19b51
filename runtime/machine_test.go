package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// The state machines (runAtomic, runLease, runUnguarded) and the HTTP layer over memstore:
// every path, every answer, every outcome, without a database.

// docs/design.md section 1, rows New and Replay; section 5 replay fidelity.
func TestMachineAtomicNewThenReplay(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	first := serveReq(h, req("t1", key1, body100))
	if first.Code != 201 || first.Header().Get("Location") == "" || first.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
	}
	if first.Header().Get("Set-Cookie") == "" || first.Header().Get("X-Internal") == "" {
		t.Error("the first response must be sent as the handler wrote it (only the stored copy is filtered)")
	}
	for i := range 2 {
		again := serveReq(h, req("t1", key1, body100))
		if again.Code != 201 || again.Body.String() != first.Body.String() {
			t.Fatalf("replay %d: %d %s, want 201 %s", i, again.Code, again.Body, first.Body)
		}
		hd := again.Header()
		if hd.Get(HeaderReplayed) != "true" || hd.Get("Location") != first.Header().Get("Location") ||
			hd.Get("Content-Type") != "application/json" || hd.Get("Content-Length") != fmt.Sprint(first.Body.Len()) {
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
	if e.obs.get(OutcomeExecuted) != 1 || e.obs.get(OutcomeReplayed) != 2 || e.obs.claimCount() != 3 {
		t.Errorf("outcomes %v, claims %d", e.obs, e.obs.claimCount())
	}
	rec, found := e.record("t1", key1)
	if !found || rec.State != store.Completed || rec.Operation != "createPayment" || rec.Response.Status != 201 {
		t.Errorf("record %+v", rec)
	}
}

// docs/design.md section 1, row Mismatch, and shared/cases 020: another body, or another operation
// reusing the key, is 422 and changes nothing; scope operation gives each operation its keys.
func TestMachineMismatch(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newMemEnv(t, nil)
			handler := e.atomicHandler
			op := payOp()
			if mode == ModeLease {
				handler, op = e.leaseHandler, leaseOp()
			}
			h := handler(op)
			first := serveReq(h, req("t1", key1, body100))
			w := serveReq(h, req("t1", key1, `{"amount":200}`))
			if p := problemOf(t, w); w.Code != 422 || p.name != ProblemPayloadMismatch || !strings.Contains(p.doc.Detail, "different request") {
				t.Fatalf("other body: %d %s", w.Code, w.Body)
			}
			other := *op
			other.ID = "createOrder"
			w = serveReq(handler(&other), req("t1", key1, body100))
			if p := problemOf(t, w); w.Code != 422 || p.name != ProblemPayloadMismatch || !strings.Contains(p.doc.Detail, "another operation") {
				t.Fatalf("other operation: %d %s", w.Code, w.Body)
			}
			perOp := *op
			perOp.ID = "createRefund"
			perOp.Scope = ScopeOperation
			if w := serveReq(handler(&perOp), req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
				t.Fatalf("scope operation: %d %s", w.Code, w.Body)
			}
			if _, found := e.record("t1", "createRefund "+key1); !found {
				t.Error("a scope-operation key is stored as operation ID, space, key")
			}
			again := serveReq(h, req("t1", key1, body100))
			if again.Body.String() != first.Body.String() || again.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("the original must still replay: %d %s", again.Code, again.Body)
			}
			if n := e.payments("t1"); n != 2 || e.obs.get(OutcomeMismatch) != 2 {
				t.Fatalf("payments %d, outcomes %v", n, e.obs)
			}
		})
	}
}

// shared/cases 010: tenants never share keys.
func TestMachineTenantsDoNotShareKeys(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	serveReq(h, req("t1", key1, body100))
	w := serveReq(h, req("t2", key1, `{"amount":999}`))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" || !strings.Contains(w.Body.String(), "999") {
		t.Fatalf("t2: %d %s", w.Code, w.Body)
	}
	if e.payments("t1") != 1 || e.payments("t2") != 1 {
		t.Fatal("each tenant pays once")
	}
}

// docs/design.md section 1, row missing/malformed key; section 2 key rules. Refused requests run nothing
// and leave no record; the quoted form of a key is the same key.
func TestKeyRules(t *testing.T) {
	e := newMemEnv(t, nil)
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
		w := serveReq(h, c.r)
		if w.Code != c.status || (c.problem != "" && problemType(t, w) != c.problem) {
			t.Errorf("%s: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.problem)
		}
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments = %d, want 2 (refused requests run nothing)", n)
	}
	if e.obs.get(OutcomeKeyMissing) != 1 || e.obs.get(OutcomeKeyInvalid) != 8 || e.obs.claimCount() != 2 {
		t.Errorf("outcomes %v, claims %d (refused requests never reach the store)", e.obs, e.obs.claimCount())
	}
	// RFC 8941 sf-string: "abc" is the key abc, so it replays.
	w := serveReq(h, req("t1", `"exactly-16-chars"`, body100))
	if w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("quoted key: %d %v", w.Code, w.Header())
	}
	for _, k := range []string{"exactly-16-chars", strings.Repeat("k", 255)} {
		if _, found := e.record("t1", k); !found {
			t.Errorf("no record for the valid key %.20s", k)
		}
	}
	for _, k := range []string{"short-key-15chr", "abcdefghijklmnopq", strings.Repeat("k", 256)} {
		if _, found := e.record("t1", k); found {
			t.Errorf("a record for the refused key %.20s", k)
		}
	}
}

// docs/design.md section 4: scope, size and media type are refused before any lookup; the decoder's
// refusal too.
func TestBeginRefusals(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.BodyLimit = 64
	h := e.atomicHandler(op)

	if w := serveReq(h, req("", key1, body100)); w.Code != 401 || problemType(t, w) != ProblemUnauthenticated {
		t.Errorf("no scope: %d %s", w.Code, w.Body)
	}
	big := `{"amount":1,"pad":"` + strings.Repeat("x", 100) + `"}`
	if w := serveReq(h, req("t1", key1, big)); w.Code != 413 || problemType(t, w) != ProblemBodyTooLarge {
		t.Errorf("declared length: %d %s", w.Code, w.Body)
	}
	r := req("t1", key1, big)
	r.ContentLength = -1 // chunked: the cap applies while reading
	if w := serveReq(h, r); w.Code != 413 || problemType(t, w) != ProblemBodyTooLarge {
		t.Errorf("streamed: %d %s", w.Code, w.Body)
	}
	r = req("t1", key1, body100)
	r.Header.Set("Content-Type", "text/plain")
	if w := serveReq(h, r); w.Code != 415 || problemType(t, w) != ProblemMediaTypeUnsupported {
		t.Errorf("media type: %d %s", w.Code, w.Body)
	}
	r = req("t1", key1, body100)
	r.Header.Set("Content-Type", "Application/JSON; charset=utf-8")
	if w := serveReq(h, r); w.Code != 201 {
		t.Errorf("media type with parameters: %d %s", w.Code, w.Body)
	}
	w := serveReq(h, req("t1", key1+"x", `{"amount":-1}`))
	if p := problemOf(t, w); w.Code != 400 || p.name != ProblemBodyInvalid || p.doc.Pointer != "/amount" {
		t.Errorf("body invalid: %d %s", w.Code, w.Body)
	}
	if _, found := e.record("t1", key1+"x"); found {
		t.Error("the refused body left a record")
	}
	if e.obs.get(OutcomeUnauthorized) != 1 || e.obs.get(OutcomeBodyInvalid) != 4 || e.obs.claimCount() != 1 {
		t.Errorf("outcomes %v, claims %d", e.obs, e.obs.claimCount())
	}
}

// docs/design.md section 2 replay.statuses: 5xx, panics, errors and 408/409/425/429 release the key and
// roll the handler's writes back; a 402 is final, stored and replayed.
func TestAtomicNonFinalOutcomesRelease(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	for i, fail := range []string{"500", "503", "408", "409", "425", "429", "panic", "error"} {
		key := key1 + "-" + fail
		w := serveReq(h, req("t1", key, body100, "X-Fail", fail))
		if w.Code < 400 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s: %d", fail, w.Code)
		}
		if (fail == "panic" || fail == "error") && (w.Code != 500 || problemType(t, w) != ProblemInternal) {
			t.Errorf("%s: %d %s, want 500 internal", fail, w.Code, w.Body)
		}
		if e.payments("t1") != i {
			t.Fatalf("%s: the handler's write must roll back", fail)
		}
		w = serveReq(h, req("t1", key, body100))
		if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s: retry must run: %d %s", fail, w.Code, w.Body)
		}
	}
	w := serveReq(h, req("t1", "k-decline-000000001", body100, "X-Fail", "402"))
	again := serveReq(h, req("t1", "k-decline-000000001", body100))
	if w.Code != 402 || again.Code != 402 || again.Header().Get(HeaderReplayed) != "true" || again.Body.String() != w.Body.String() {
		t.Fatalf("decline: %d then %d %v", w.Code, again.Code, again.Header())
	}
	if e.obs.get(OutcomeReleased) != 8 {
		t.Errorf("released = %d", e.obs.get(OutcomeReleased))
	}
}

// replay.statuses of an operation replace the default: here 409 is final and 202 is not.
func TestMachineCustomStatuses(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Statuses = []StatusRule{{Class: 2}, {Code: 409}, {Code: 202, Exclude: true}}
	h := e.atomicHandler(op)
	serveReq(h, req("t1", "k-custom-409-000001", body100, "X-Fail", "409"))
	if w := serveReq(h, req("t1", "k-custom-409-000001", body100)); w.Code != 409 || w.Header().Get(HeaderReplayed) != "true" {
		t.Errorf("409 listed as final: %d %v, want its replay", w.Code, w.Header())
	}
	serveReq(h, req("t1", "k-custom-202-000001", body100, "X-Fail", "202"))
	if w := serveReq(h, req("t1", "k-custom-202-000001", body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("202 excluded: %d %v, want a new run", w.Code, w.Header())
	}
	if n := e.payments("t1"); n != 2 {
		t.Errorf("payments %d, want 2 (the 409 and the retry of the 202)", n)
	}
}

// docs/design.md section 5: a response body above limits.response is delivered, the record keeps status
// and headers, and the replay has an empty body marked omitted.
func TestResponseAboveLimit(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.ResponseLimit = 100
	h := e.atomicHandler(op)
	w := serveReq(h, req("t1", key1, body100, "X-Big", "1000"))
	if w.Code != 201 || w.Body.Len() != 1000 {
		t.Fatalf("first: %d %d bytes", w.Code, w.Body.Len())
	}
	again := serveReq(h, req("t1", key1, body100, "X-Big", "1000"))
	if again.Code != 201 || again.Body.Len() != 0 || again.Header().Get(HeaderReplayBody) != "omitted" ||
		again.Header().Get("Location") == "" || again.Header().Get(HeaderReplayed) != "true" || again.Header().Get("Content-Length") != "0" {
		t.Fatalf("replay: %d %q %v", again.Code, again.Body, again.Header())
	}
	// A body exactly at the limit is stored.
	serveReq(h, req("t1", key1+"-100", body100, "X-Big", "100"))
	if w := serveReq(h, req("t1", key1+"-100", body100)); w.Body.Len() != 100 || w.Header().Get(HeaderReplayBody) != "" {
		t.Errorf("body at the limit: %d bytes, %v", w.Body.Len(), w.Header())
	}
	if e.payments("t1") != 2 {
		t.Fatal("ran twice")
	}
}

// Logs never carry a raw key (docs/design.md section 4): they show a short hash. A handler's panic is
// logged with its stack, and answered 500 without dropping the connection.
func TestLogsHashKeys(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.atomicHandler(payOp())
	w := serveReq(h, req("t1", key1, body100, "X-Fail", "panic"))
	if w.Code != 500 || problemType(t, w) != ProblemInternal || strings.Contains(w.Body.String(), "test panic") {
		t.Fatalf("panic: %d %s", w.Code, w.Body)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "key_hash="+keyHash("t1", key1)) || strings.Contains(logs, key1) {
		t.Fatalf("logs: %s", logs)
	}
	if len(keyHash("t1", key1)) != 12 || keyHash("t1", key1) == keyHash("t2", key1) || keyHash("t1x", "y") == keyHash("t1", "xy") {
		t.Error("keyHash: 12 hex digits over scope and key, framed")
	}
}

// A handler error or panic is a 500 whose log line has the error and, for a panic, the stack of
// the panicking goroutine; the key is free again.
func TestMachineHandlerFailure(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		for _, fail := range []string{"error", "panic"} {
			t.Run(mode.String()+"/"+fail, func(t *testing.T) {
				e := newMemEnv(t, nil)
				h := e.atomicHandler(payOp())
				if mode == ModeLease {
					h = e.leaseHandler(leaseOp())
				}
				w := serveReq(h, req("t1", key1, body100, "X-Fail", fail))
				if w.Code != 500 || problemType(t, w) != ProblemInternal {
					t.Fatalf("%d %s, want 500 internal", w.Code, w.Body)
				}
				logs := e.logs.String()
				if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "key released") {
					t.Errorf("log: %s", logs)
				}
				if fail == "panic" {
					// The stack names the function that panicked (the test's handler).
					if !strings.Contains(logs, "handler panicked") || !strings.Contains(logs, "stack=") ||
						!strings.Contains(logs, "goroutine") || !strings.Contains(logs, "harness_test.go") {
						t.Errorf("panic log without its stack: %s", logs)
					}
				} else if !strings.Contains(logs, "error=") || strings.Contains(logs, "stack=") {
					t.Errorf("error log: %s", logs)
				}
				if _, found := e.record("t1", key1); found {
					t.Error("a failed request left a record")
				}
				if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
					t.Errorf("retry: %d, want a new run", w.Code)
				}
				if e.payments("t1") != 1 || e.obs.get(OutcomeReleased) != 1 {
					t.Errorf("payments %d, outcomes %v", e.payments("t1"), e.obs)
				}
			})
		}
	}
}

// A handler status outside 100-999 is a handler failure, not a response.
func TestMachineHandlerBadStatus(t *testing.T) {
	e := newMemEnv(t, nil)
	h := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(context.Context, *memstore.DB, *payReq) (Response, error) {
		return Response{Status: 1000}, nil
	}))
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 500 || problemType(t, w) != ProblemInternal {
		t.Errorf("%d %s, want 500", w.Code, w.Body)
	}
	zero := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(context.Context, *memstore.DB, *payReq) (Response, error) {
		return Response{Body: []byte("zero")}, nil
	}))
	if w := serveReq(zero, req("t1", key1+"-zero", body100)); w.Code != 200 {
		t.Errorf("zero status: %d, want 200", w.Code)
	}
	if rec, _ := e.record("t1", key1+"-zero"); rec.Response.Status != 200 {
		t.Errorf("zero status stored as %d", rec.Response.Status)
	}
}

// A scope function that fails or panics refuses the request with Config.ScopeStatus before any
// lookup; a panic is recovered, so the connection stays up (a real server and client: a
// dropped connection would fail the second request or not reuse the first connection).
func TestMachineScopeRefusal(t *testing.T) {
	for _, c := range []struct {
		name   string
		scope  ScopeFunc
		status int
	}{
		{"error", func(*http.Request) (string, error) { return "", errors.New("bad token") }, 0},
		{"panic", func(*http.Request) (string, error) { panic("scope exploded") }, 0},
		{"status", func(*http.Request) (string, error) { return "", errors.New("bad token") }, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newMemEnv(t, func(cfg *Config) { cfg.Scope, cfg.ScopeStatus = c.scope, c.status })
			srv := httptest.NewServer(e.atomicHandler(payOp()))
			defer srv.Close()
			want := c.status
			if want == 0 {
				want = 401
			}
			reused := 0
			for i := range 2 {
				r, _ := http.NewRequest("POST", srv.URL+"/v1/payments", strings.NewReader(body100))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", key1)
				r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
					GotConn: func(ci httptrace.GotConnInfo) {
						if ci.Reused {
							reused++
						}
					},
				}))
				resp, err := srv.Client().Do(r)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/problem+json" ||
					!strings.Contains(string(body), "/"+ProblemUnauthenticated) {
					t.Errorf("request %d: %d %s, want %d unauthenticated", i, resp.StatusCode, body, want)
				}
				if strings.Contains(string(body), "bad token") || strings.Contains(string(body), "exploded") {
					t.Errorf("the scope function's reason reached the client: %s", body)
				}
			}
			if reused != 1 {
				t.Errorf("the second request reused %d connections, want 1: the first was dropped", reused)
			}
			if e.obs.get(OutcomeUnauthorized) != 2 || e.obs.claimCount() != 0 || e.payments("") != 0 {
				t.Errorf("outcomes %v, claims %d", e.obs, e.obs.claimCount())
			}
			if c.name == "panic" && !strings.Contains(e.logs.String(), "scope function panicked") {
				t.Errorf("the panic is not in the debug log: %s", e.logs)
			}
		})
	}
}

// A handler panic through a real server: 500 problem, the connection stays up.
func TestMachineHandlerPanicKeepsConnection(t *testing.T) {
	e := newMemEnv(t, nil)
	srv := httptest.NewServer(e.atomicHandler(payOp()))
	defer srv.Close()
	for i, fail := range []string{"panic", ""} {
		r, _ := http.NewRequest("POST", srv.URL+"/v1/payments", strings.NewReader(body100))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer t1")
		r.Header.Set("Idempotency-Key", key1)
		r.Header.Set("X-Fail", fail)
		var reused bool
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused },
		}))
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := []int{500, 201}[i]; resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
		if i == 1 && !reused {
			t.Error("the connection of the panicking request was dropped")
		}
	}
}

// shared/cases 009: a duplicate while the first runs gets 409 in-flight with Retry-After
// (Config.ConflictRetryAfter, rounded up), at once; the duplicate's handler never runs.
func TestMachineAtomicConflict(t *testing.T) {
	e := newMemEnv(t, func(c *Config) { c.ConflictRetryAfter = 2500 * time.Millisecond })
	h := e.atomicHandler(payOp())
	done := make(chan int)
	go func() { done <- serveReq(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := e.gate("first")
	g.wait(t)
	w := serveReq(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || w.Header().Get("Retry-After") != "3" {
		t.Errorf("duplicate: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Another body meets no visible record (an atomic claim is invisible): 409 as well.
	if w := serveReq(h, req("t1", key1, `{"amount":5}`)); w.Code != 409 {
		t.Errorf("other body while in flight: %d", w.Code)
	}
	g.open()
	if code := <-done; code != 201 {
		t.Fatalf("first: %d", code)
	}
	if e.payments("t1") != 1 || e.obs.get(OutcomeConflict) != 2 {
		t.Errorf("payments %d, outcomes %v", e.payments("t1"), e.obs)
	}
}

// key.required false: a request without a key runs unguarded (no record, writes committed when
// the answer is final, rolled back otherwise), in both modes; a lease-mode handle then derives
// from a nonce.
func TestMachineUnguarded(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key.Required = false
	h := e.atomicHandler(op)
	for i := range 2 {
		if w := serveReq(h, req("t1", "", body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%d: %d", i, w.Code)
		}
	}
	for _, fail := range []string{"500", "error", "panic"} {
		if w := serveReq(h, req("t1", "", body100, "X-Fail", fail)); w.Code != 500 {
			t.Fatalf("%s: %d", fail, w.Code)
		}
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments %d, want 2 (non-final answers roll back)", n)
	}
	if e.obs.get(OutcomeUnguarded) != 3 || e.obs.get(OutcomeReleased) != 2 || e.obs.claimCount() != 0 {
		t.Errorf("outcomes %v, claims %d", e.obs, e.obs.claimCount())
	}
	// A present key is still checked and guarded.
	if w := serveReq(h, req("t1", "short", body100)); w.Code != 400 {
		t.Errorf("invalid optional key: %d", w.Code)
	}

	lop := leaseOp()
	lop.Key.Required = false
	var keys []string
	var mu sync.Mutex
	lh := LeaseHandler(e.rt, lop, BindLease(decodePay, func(ctx context.Context, l *Lease, r *payReq) (CompleteFunc[*memstore.DB], error) {
		mu.Lock()
		pk, err := l.ProviderKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		keys = append(keys, pk)
		mu.Unlock()
		if l.Token() != 0 || l.Extend(ctx, time.Second) != nil {
			return nil, errors.New("an unguarded handle has token 0 and extends nothing")
		}
		return func(ctx context.Context, db *memstore.DB) (Response, error) {
			e.pay(db, r)
			return Response{Status: 201}, nil
		}, nil
	}))
	for range 2 {
		if w := serveReq(lh, req("t1", "", body100)); w.Code != 201 {
			t.Fatalf("lease unguarded: %d %s", w.Code, w.Body)
		}
	}
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Errorf("unguarded provider keys %q: want two different ones", keys)
	}
	if n := e.payments("t1"); n != 4 {
		t.Errorf("payments %d, want 4", n)
	}
}

// docs/design.md section 4, lease mode: new, 409 with Retry-After = the lease's remaining time while
// it runs, 422 with another body (the record is visible), replay, one provider call.
func TestMachineLeaseNewConflictReplay(t *testing.T) {
	e := newMemEnv(t, nil)
	op := leaseOp()
	op.Lease = 30 * time.Second
	h := e.leaseHandler(op)
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- serveReq(h, req("t1", key1, body100, "X-Hold", "call")) }()
	g := e.gate("call")
	g.wait(t)
	e.clock.advance(10 * time.Second)
	w := serveReq(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("in flight: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = serveReq(h, req("t1", key1, `{"amount":5}`))
	if w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch {
		t.Fatalf("mismatch in flight: %d %s", w.Code, w.Body)
	}
	g.open()
	if w := <-first; w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first: %d", w.Code)
	}
	w = serveReq(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" || w.Header().Get("Location") == "" {
		t.Fatalf("replay: %d %v", w.Code, w.Header())
	}
	if e.payments("t1") != 1 || e.charges() != 1 {
		t.Fatalf("payments %d, provider calls %d", e.payments("t1"), e.charges())
	}
}

// shared/cases 024: a failed lease handler (call phase error or panic, a non-final status in
// the completion) releases the key; the retry runs again and the provider's deduplication on
// the derived key keeps one charge per key.
func TestMachineLeaseFailureReleases(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.leaseHandler(leaseOp())
	for _, fail := range []string{"503", "error", "panic"} {
		key := key1 + fail
		if w := serveReq(h, req("t1", key, body100, "X-Fail", fail)); w.Code < 500 {
			t.Fatalf("%s: %d", fail, w.Code)
		}
		if _, found := e.record("t1", key); found {
			t.Fatalf("%s: the running record was not released", fail)
		}
		if w := serveReq(h, req("t1", key, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%s retry: %d %s", fail, w.Code, w.Body)
		}
	}
	if e.payments("t1") != 3 || e.charges() != 3 {
		t.Fatalf("payments %d, provider calls %d; want 3 and 3", e.payments("t1"), e.charges())
	}
	if e.obs.get(OutcomeReleased) != 3 {
		t.Errorf("outcomes %v", e.obs)
	}
}

// Lease takeover and fencing on the store's clock: after the lease ends, only the same request
// takes over (token 2); the zombie's completion finds its token replaced (lease_lost, 409) and
// the record keeps the new owner's result; the provider sees one charge.
func TestMachineLeaseTakeoverFencesZombie(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.leaseHandler(leaseOp())
	zombie := make(chan *httptest.ResponseRecorder)
	go func() { zombie <- serveReq(h, req("t1", key1, body100, "X-Hold", "zombie")) }()
	g := e.gate("zombie")
	g.wait(t)
	if w := serveReq(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body while leased: %d", w.Code)
	}
	e.clock.advance(time.Second) // the 500ms lease is over
	if w := serveReq(h, req("t1", key1, `{"amount":7}`)); w.Code != 422 {
		t.Fatalf("other body after the lease: %d, want 422 (only the same request takes over)", w.Code)
	}
	owner := serveReq(h, req("t1", key1, body100))
	if owner.Code != 201 || owner.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("takeover: %d %s", owner.Code, owner.Body)
	}
	if rec, _ := e.record("t1", key1); rec.Token != 2 || rec.State != store.Completed {
		t.Errorf("record after the takeover: token %d state %d", rec.Token, rec.State)
	}
	g.open()
	z := <-zombie
	if z.Code != 409 || problemType(t, z) != ProblemInFlight || z.Header().Get("Retry-After") == "" {
		t.Fatalf("zombie: %d %s", z.Code, z.Body)
	}
	replay := serveReq(h, req("t1", key1, body100))
	if replay.Body.String() != owner.Body.String() || replay.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("the record must hold the new owner's response: %s vs %s", replay.Body, owner.Body)
	}
	if e.payments("t1") != 1 || e.charges() != 1 {
		t.Fatalf("payments %d, provider calls %d; want 1 and 1", e.payments("t1"), e.charges())
	}
	if e.obs.get(OutcomeTakeover) != 1 || e.obs.get(OutcomeLeaseLost) != 1 {
		t.Fatalf("outcomes %v", e.obs)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "lease taken over") || !strings.Contains(logs, "lease lost") {
		t.Errorf("logs: %s", logs)
	}
}

// Extend (heartbeat) keeps the claim past its lease: a retry after the original lease gets 409
// with the extended lease's remaining time, not a takeover; a zombie's Extend is ErrLeaseLost.
func TestMachineLeaseExtend(t *testing.T) {
	e := newMemEnv(t, nil)
	op := leaseOp()
	extendErr := make(chan error, 2)
	h := LeaseHandler(e.rt, op, BindLease(decodePay, func(ctx context.Context, l *Lease, r *payReq) (CompleteFunc[*memstore.DB], error) {
		if r.Header.Get("X-Hold") != "" {
			extendErr <- l.Extend(ctx, 5*time.Second)
			e.hold(r)
			extendErr <- l.Extend(ctx, 5*time.Second)
		}
		return func(ctx context.Context, db *memstore.DB) (Response, error) { return Response{Status: 201}, nil }, nil
	}))
	done := make(chan int)
	go func() { done <- serveReq(h, req("t1", key1, body100, "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	if err := <-extendErr; err != nil {
		t.Fatalf("Extend: %v", err)
	}
	e.clock.advance(time.Second) // past the original 500ms lease
	w := serveReq(h, req("t1", key1, body100))
	if w.Code != 409 || w.Header().Get("Retry-After") != "4" {
		t.Fatalf("extended lease: %d Retry-After %q, want 409 and 4", w.Code, w.Header().Get("Retry-After"))
	}
	e.clock.advance(5 * time.Second) // now the extended lease is over too: a takeover
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 {
		t.Fatalf("takeover: %d", w.Code)
	}
	g.open()
	if err := <-extendErr; !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the zombie's Extend: %v, want ErrLeaseLost", err)
	}
	if code := <-done; code != 409 {
		t.Errorf("zombie: %d, want 409", code)
	}
	if e.obs.get(OutcomeTakeover) != 1 {
		t.Errorf("outcomes %v", e.obs)
	}
}

// concurrency.wait in lease mode: a duplicate polls the visible record and replays when the
// first finishes within the wait; when the wait runs out it gets 409 with the lease's time.
func TestMachineLeaseWaitThenReplay(t *testing.T) {
	e := newMemEnv(t, nil)
	op := leaseOp()
	op.Lease = 30 * time.Second
	op.Wait = 10 * time.Second
	h := e.leaseHandler(op)
	first := make(chan int)
	go func() { first <- serveReq(h, req("t1", key1, body100, "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	dup := make(chan *httptest.ResponseRecorder)
	go func() { dup <- serveReq(h, req("t1", key1, body100)) }()
	// The duplicate has looked at least twice (its claims are observed) before the first ends.
	eventually(t, "the duplicate to poll", func() bool { return e.obs.claimCount() >= 3 })
	g.open()
	if code := <-first; code != 201 {
		t.Fatalf("first: %d", code)
	}
	if w := <-dup; w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("waiting duplicate: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if e.charges() != 1 || e.payments("t1") != 1 {
		t.Fatalf("charges %d, payments %d", e.charges(), e.payments("t1"))
	}

	op2 := leaseOp()
	op2.Lease = 30 * time.Second
	op2.Wait = 120 * time.Millisecond
	h2 := e.leaseHandler(op2)
	go func() { first <- serveReq(h2, req("t1", key1+"-2", body100, "X-Hold", "call2")).Code }()
	g2 := e.gate("call2")
	g2.wait(t)
	start := time.Now()
	w := serveReq(h2, req("t1", key1+"-2", body100))
	if w.Code != 409 || w.Header().Get("Retry-After") != "30" || time.Since(start) < op2.Wait {
		t.Errorf("wait ran out: %d Retry-After %q after %v", w.Code, w.Header().Get("Retry-After"), time.Since(start))
	}
	g2.open()
	<-first
}

// An atomic-mode request that meets a running lease-mode record of the same request waits like
// a duplicate (409), even after the lease ended: only lease mode takes over.
func TestMachineAtomicMeetsRunningLease(t *testing.T) {
	e := newMemEnv(t, nil)
	lop := leaseOp()
	aop := payOp()
	aop.ID = lop.ID // the same operation served in both modes (a migration between modes)
	done := make(chan int)
	go func() { done <- serveReq(e.leaseHandler(lop), req("t1", key1, body100, "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	e.clock.advance(time.Minute)
	if w := serveReq(e.atomicHandler(aop), req("t1", key1, body100)); w.Code != 409 || e.obs.get(OutcomeTakeover) != 0 {
		t.Errorf("atomic request on a running lease: %d, outcomes %v", w.Code, e.obs)
	}
	g.open()
	<-done
}

// otherDB is a handle type no store here runs writes through.
type otherDB struct{}

// A store that cannot run the handler's DB writes (here memstore, whose handle is *memstore.DB,
// for a handler written against another type) answers every request 500 without running
// anything, and CheckStore reports it naming both types.
func TestMisconfiguredStore(t *testing.T) {
	e := newMemEnv(t, nil)
	ran := false
	atomicH := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(context.Context, *otherDB, *payReq) (Response, error) {
		ran = true
		return Response{Status: 201}, nil
	}))
	leaseH := LeaseHandler(e.rt, leaseOp(), BindLease(decodePay, func(context.Context, *Lease, *payReq) (CompleteFunc[*otherDB], error) {
		ran = true
		return nil, nil
	}))
	for name, h := range map[string]http.Handler{"atomic": atomicH, "lease": leaseH} {
		w := serveReq(h, req("t1", key1, body100))
		if w.Code != 500 || problemType(t, w) != ProblemInternal {
			t.Errorf("%s: %d %s, want 500 internal", name, w.Code, w.Body)
		}
	}
	if ran || e.obs.claimCount() != 0 || e.obs.get(OutcomeInternal) != 2 {
		t.Errorf("ran %v, claims %d, outcomes %v", ran, e.obs.claimCount(), e.obs)
	}
	if !strings.Contains(e.logs.String(), "otherDB") {
		t.Errorf("the log does not say what is wrong: %s", e.logs)
	}
	err := CheckStore[*otherDB](e.rt, payOp())
	if err == nil || !strings.Contains(err.Error(), "otherDB") || !strings.Contains(err.Error(), "memstore") || !strings.Contains(err.Error(), "createPayment") {
		t.Errorf("CheckStore: %v", err)
	}
	if err := CheckStore[*memstore.DB](e.rt, payOp()); err != nil {
		t.Errorf("CheckStore of the store's own handle: %v", err)
	}
	if err := CheckStore[*memstore.DB](nil, payOp()); err == nil {
		t.Error("CheckStore of a nil Runtime must fail")
	}
	// A store with only the lease protocol (no transactions) serves no handler.
	rt, err := New(Config{Store: leaseOnly{e.mem}, SingleTenant: true, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStore[*memstore.DB](rt, leaseOp()); err == nil {
		t.Error("CheckStore of a store.Store that is not Transactional must fail")
	}
}

// leaseOnly hides memstore's transactions: a store.Store and nothing more.
type leaseOnly struct{ store.Store }

// A custom ProblemWriter writes every refusal; the problem name and Retry-After reach it.
func TestMachineProblemWriter(t *testing.T) {
	var seen []Problem
	var mu sync.Mutex
	e := newMemEnv(t, func(c *Config) {
		c.ProblemWriter = func(w http.ResponseWriter, r *http.Request, p Problem) {
			mu.Lock()
			seen = append(seen, p)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(p.Status)
			fmt.Fprintf(w, `{"error":{"code":%q}}`, p.Name)
		}
	})
	h := e.atomicHandler(payOp())
	w := serveReq(h, req("t1", "", body100))
	if w.Code != 400 || w.Body.String() != `{"error":{"code":"key-missing"}}` {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	done := make(chan struct{})
	go func() { serveReq(h, req("t1", key1, body100, "X-Hold", "first")); close(done) }()
	g := e.gate("first")
	g.wait(t)
	serveReq(h, req("t1", key1, body100))
	g.open()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].Name != ProblemKeyMissing || seen[0].Title == "" ||
		seen[1].Name != ProblemInFlight || seen[1].RetryAfter != time.Second {
		t.Errorf("problems %+v", seen)
	}
	if ProblemJSON("https://example.test/p/") == nil {
		t.Fatal("ProblemJSON")
	}
	rec := httptest.NewRecorder()
	ProblemJSON("https://example.test/p/")(rec, nil, newProblem(409, ProblemInFlight, "d"))
	if !strings.Contains(rec.Body.String(), `"type":"https://example.test/p/in-flight"`) || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("ProblemJSON with a base: %v %s", rec.Header(), rec.Body)
	}
}

// SingleTenant: every request has the scope "" and needs no credentials.
func TestMachineSingleTenant(t *testing.T) {
	e := newMemEnv(t, func(c *Config) { c.Scope, c.SingleTenant = nil, true })
	h := e.atomicHandler(payOp())
	if w := serveReq(h, req("", key1, body100)); w.Code != 201 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := serveReq(h, req("anyone", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
		t.Errorf("another caller of a single-tenant service replays the same key: %d", w.Code)
	}
	if _, found := e.record("", key1); !found {
		t.Error("no record under the empty scope")
	}
}

// concurrency.wait in atomic mode: the store waits up to Operation.Wait for the concurrent
// claim (store.Claim.Wait), so a duplicate replays once the first commits instead of getting
// 409; when the wait runs out it gets 409.
func TestMachineAtomicWaitThenReplay(t *testing.T) {
	e, f := newFaultEnv(t, nil)
	calls, entered := 0, make(chan struct{})
	var mu sync.Mutex
	f.beginAtomic = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 2 {
			close(entered) // the duplicate is at the store
		}
		return nil
	}
	op := payOp()
	op.Wait = 10 * time.Second
	h := e.atomicHandler(op)
	first := make(chan int)
	go func() { first <- serveReq(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := e.gate("first")
	g.wait(t)
	dup := make(chan *httptest.ResponseRecorder)
	go func() { dup <- serveReq(h, req("t1", key1, body100)) }()
	<-entered
	// A store that waits holds the duplicate now; one that does not answers it at once. (Only
	// an absence can be checked here, so it is bounded by a timer.)
	select {
	case w := <-dup:
		g.open()
		<-first
		t.Fatalf("the duplicate did not wait for the first request: %d %s", w.Code, w.Body)
	case <-time.After(200 * time.Millisecond):
	}
	g.open()
	if code := <-first; code != 201 {
		t.Fatalf("first: %d", code)
	}
	if w := <-dup; w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" {
		t.Fatalf("waiting duplicate: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if e.payments("t1") != 1 {
		t.Fatalf("payments %d", e.payments("t1"))
	}
}
