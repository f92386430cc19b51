package runtime

import (
	"encoding/json"
	"strings"
	"testing"
)

// The Stripe profile: Stripe's error envelope for every problem, a Request-Id on every answer,
// the key echoed, a replay naming the first execution in Original-Request, and the account
// header folded into the scope.
func TestProfileStripe(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Profile = ProfileStripe
	op.ScopeHeaders = []string{"Stripe-Account"}
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
// no scope of its own (a rotated header used to give a tenant fresh keys and caps for every
// value). Without the profile, scope headers are taken as sent.
func TestProfileStripeAccountValidated(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Profile = ProfileStripe
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
