package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The Stripe profile: Stripe's error envelope for every problem, a Request-Id on every answer,
// the key echoed, a replay naming the first execution in Original-Request, and the account
// header folded into the scope.
func TestProfileStripe(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	StripeProfile().Apply(op)
	if op.Wait != 5*time.Second || op.Key.MinLength != 1 || op.Key.MaxLength != 255 || len(op.ScopeHeaders) != 1 {
		t.Fatalf("StripeProfile().Apply: %+v", op)
	}
	op.Wait = 0 // the test's duplicates are sequential
	h := e.atomicHandler(op)

	first := serveReq(h, req("t1", key1, body100, "Stripe-Account", "acct_1"))
	id := first.Header().Get("Request-Id")
	if first.Code != 201 || !strings.HasPrefix(id, "req_") || first.Header().Get("Original-Request") != id ||
		first.Header().Get("Idempotency-Key") != key1 {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	replay := serveReq(h, req("t1", key1, body100, "Stripe-Account", "acct_1"))
	if replay.Code != 201 || replay.Header().Get(HeaderReplayed) != "true" || replay.Header().Get("Original-Request") != id ||
		replay.Header().Get("Request-Id") == id || !strings.HasPrefix(replay.Header().Get("Request-Id"), "req_") {
		t.Errorf("replay: %d %v", replay.Code, replay.Header())
	}
	// The same key on another connected account is another request.
	other := serveReq(h, req("t1", key1, `{"amount":7}`, "Stripe-Account", "acct_2"))
	if other.Code != 201 || other.Header().Get(HeaderReplayed) != "" {
		t.Errorf("another account: %d %v", other.Code, other.Header())
	}
	if e.payments("t1") != 2 {
		t.Errorf("payments %d, want 2", e.payments("t1"))
	}
	// A reused key with another amount: Stripe's idempotency_error, 400, with a Request-Id.
	w := serveReq(h, req("t1", key1, `{"amount":5}`, "Stripe-Account", "acct_1"))
	var env struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != 400 || env.Error.Type != "idempotency_error" ||
		w.Header().Get("Request-Id") == "" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("mismatch: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// A body the decoder refuses is answered before the key is read, and still echoes it.
	if w := serveReq(h, req("t1", key1, `{"amount":"x"}`, "Stripe-Account", "acct_1")); w.Code != 400 ||
		w.Header().Get("Idempotency-Key") != key1 || w.Header().Get("Request-Id") == "" {
		t.Errorf("refused body: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Without the profile, the same problem is RFC 9457.
	plain := e.atomicHandler(payOp())
	serveReq(plain, req("t2", key1, body100))
	if w := serveReq(plain, req("t2", key1, `{"amount":5}`)); w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch ||
		w.Header().Get("Request-Id") != "" {
		t.Errorf("default profile: %d %v", w.Code, w.Header())
	}
}

// Under the Stripe profile, Stripe-Account must be a connected account id (acct_ and letters and
// digits) or absent: anything else is refused before any lookup, 400 naming the header, and makes
// no scope of its own (else rotating the header would give a tenant fresh keys and caps for
// every value). Without the profile, scope headers are taken as sent.
func TestProfileStripeAccountValidated(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Profile = StripeProfile()
	op.ScopeHeaders = []string{"Stripe-Account"}
	h := e.atomicHandler(op)
	for _, v := range []string{"acct_1032D82eZvKYlo2C", ""} {
		extra := []string{}
		if v != "" {
			extra = []string{"Stripe-Account", v}
		}
		if w := serveReq(h, req("t1", key1+v, body100, extra...)); w.Code != 201 {
			t.Errorf("Stripe-Account %q: %d %s", v, w.Code, w.Body)
		}
	}
	for _, v := range []string{"acct_", "x", "ACCT_1", "acct_1 2", "acct_<script>", "acct_" + strings.Repeat("a", 251), "cus_123"} {
		w := serveReq(h, req("t1", key1, body100, "Stripe-Account", v))
		var env struct{ Error struct{ Type, Param string } }
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != 400 || env.Error.Type != "invalid_request_error" ||
			env.Error.Param != "Stripe-Account" || w.Header().Get("Request-Id") == "" {
			t.Errorf("Stripe-Account %q: %d %s, want 400 invalid_request_error on Stripe-Account", v, w.Code, w.Body)
		}
	}
	if e.payments("t1") != 2 {
		t.Errorf("payments %d, want 2: a refused account header must not run", e.payments("t1"))
	}
	plain := payOp()
	plain.ScopeHeaders = []string{"Stripe-Account"}
	if w := serveReq(e.atomicHandler(plain), req("t2", key1, body100, "Stripe-Account", "anything")); w.Code != 201 {
		t.Errorf("without the profile: %d", w.Code)
	}
}

// A team's own profile, given to the Runtime (Config.Profile): its writer answers the errors, its
// request ids are made by its function under its header names, its extra replayed header is
// stored and replayed, and the key is echoed, also for a request refused before its key was
// read. An operation with a profile of its own keeps it.
func TestProfileOfTheTeam(t *testing.T) {
	n := 0
	team := &Profile{
		Name: "acme",
		Problems: func(w http.ResponseWriter, _ *http.Request, p Problem) {
			WriteProblem(w, p, "application/vnd.acme.error+json", fmt.Appendf(nil, `{"error_code":%q,"message":%q}`, p.Name, p.Detail))
		},
		EchoKey:       true,
		ReplayHeaders: []string{"X-Acme-Trace"},
		RequestID: &RequestID{Header: "X-Acme-Request", Original: "X-Acme-Original", New: func() string {
			n++
			return fmt.Sprintf("acme-%d", n)
		}},
	}
	e := newMemEnv(t, func(c *Config) { c.Profile = team })
	h := e.atomicHandler(payOp())

	first := serveReq(h, req("t1", key1, body100))
	if first.Code != 201 || first.Header().Get("X-Acme-Request") != "acme-1" || first.Header().Get("X-Acme-Original") != "acme-1" ||
		first.Header().Get("Idempotency-Key") != key1 || first.Header().Get("Request-Id") != "" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	replay := serveReq(h, req("t1", key1, body100))
	if replay.Code != 201 || replay.Header().Get(HeaderReplayed) != "true" ||
		replay.Header().Get("X-Acme-Request") != "acme-2" || replay.Header().Get("X-Acme-Original") != "acme-1" {
		t.Errorf("replay: %d %v", replay.Code, replay.Header())
	}
	w := serveReq(h, req("t1", key1, `{"amount":5}`))
	var doc struct{ ErrorCode, Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Code != 422 || w.Header().Get("Content-Type") != "application/vnd.acme.error+json" ||
		w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("X-Acme-Original") != "acme-3" {
		t.Errorf("mismatch: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Refused before the key was read: the key as sent, unless no valid key is that long.
	if w := serveReq(h, req("t1", key1, `{"amount":-1}`)); w.Code != 400 || w.Header().Get("Idempotency-Key") != key1 {
		t.Errorf("refused body: %d %v", w.Code, w.Header())
	}
	long := strings.Repeat("k", 256)
	if w := serveReq(h, req("t1", long, `{"amount":-1}`)); w.Code != 400 || w.Header().Get("Idempotency-Key") != "" {
		t.Errorf("refused body, overlong key: %d %v", w.Code, w.Header())
	}

	// An operation's own profile wins over the Runtime's, whole.
	op := payOp()
	op.ID = "createRefund"
	op.Path = "/v1/refunds"
	op.Profile = &Profile{Name: "plain"}
	plain := e.atomicHandler(op)
	if w := serveReq(plain, req("t1", key1, body100)); w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch ||
		w.Header().Get("X-Acme-Request") != "" || w.Header().Get("Idempotency-Key") != "" {
		t.Errorf("operation's own profile: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

// The profile's extra replayed header is stored with the response and replayed; without the
// profile it is not.
func TestProfileReplayHeaders(t *testing.T) {
	op := payOp()
	h := http.Header{"X-Acme-Trace": {"t-1"}, "Content-Type": {"application/json"}}
	if got := string(storableHeaders(op, &Profile{ReplayHeaders: []string{"x-acme-trace"}}, h)); got != `{"Content-Type":["application/json"],"X-Acme-Trace":["t-1"]}` {
		t.Errorf("with the profile: %s", got)
	}
	if got := string(storableHeaders(op, nil, h)); got != `{"Content-Type":["application/json"]}` {
		t.Errorf("without: %s", got)
	}
	if got := string(storableHeaders(op, &Profile{ReplayHeaders: []string{"Set-Cookie"}}, http.Header{"Set-Cookie": {"s"}})); got != "" {
		t.Errorf("a never-stored header: %s", got)
	}
}

// Apply gives an operation the profile's settings only where it has none of its own.
func TestProfileApply(t *testing.T) {
	op := payOp()
	op.Key.MinLength, op.Wait = 24, time.Second
	StripeProfile().Apply(op)
	if op.Key.MinLength != 24 || op.Key.MaxLength != 255 || op.Wait != time.Second || op.ScopeHeaders[0] != "Stripe-Account" || op.Profile.Name != "stripe" {
		t.Errorf("%+v", op)
	}
}

// Config.ProblemWriter and a Config.Profile with a writer of its own cannot both be set.
func TestProfileProblemWriterConflict(t *testing.T) {
	_, err := New(Config{Store: newMemEnv(t, nil).mem, SingleTenant: true, ProblemWriter: ProblemJSON(""), Profile: StripeProfile()})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("New: %v", err)
	}
}

// The HTTP layer reads a profile's fields, never its name: no vendor appears in http.go, and
// no file of the flow looks at a profile's name or a built-in profile.
func TestHTTPLayerNamesNoProfile(t *testing.T) {
	for _, file := range []string{"http.go", "replay.go", "atomic.go", "lease.go", "middleware.go", "guard.go", "frameworks.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pattern := `StripeProfile|StripeErrors|(?i:prof\w*)\.Name\b`
		if file == "http.go" {
			pattern = `(?i)stripe|prof\w*\.Name\b`
		}
		if m := regexp.MustCompile(pattern).Find(src); m != nil {
			t.Errorf("%s names %q", file, m)
		}
	}
}
