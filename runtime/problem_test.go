package runtime

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// Every problem the runtime answers, through both built-in writers: status, content type,
// Retry-After and the members a client matches on.
func TestProblemWriters(t *testing.T) {
	type want struct {
		status                 int
		stripeStatus           int
		stripeType, stripeCode string
		retryAfter             string
	}
	cases := map[string]want{
		ProblemKeyMissing:           {400, 400, "invalid_request_error", "", ""},
		ProblemKeyInvalid:           {400, 400, "invalid_request_error", "", ""},
		ProblemBodyInvalid:          {400, 400, "invalid_request_error", "", ""},
		ProblemUnauthenticated:      {401, 401, "invalid_request_error", "", ""},
		ProblemInFlight:             {409, 409, "invalid_request_error", "idempotency_key_in_use", "2"},
		ProblemResultExpired:        {410, 410, "invalid_request_error", "idempotency_key_expired", ""},
		ProblemKeyExpired:           {412, 412, "invalid_request_error", "", ""},
		ProblemBodyTooLarge:         {413, 413, "invalid_request_error", "", ""},
		ProblemMediaTypeUnsupported: {415, 415, "invalid_request_error", "", ""},
		ProblemPayloadMismatch:      {422, 400, "idempotency_error", "", ""},
		ProblemRateLimited:          {429, 429, "invalid_request_error", "rate_limit", "2"},
		ProblemInternal:             {500, 500, "api_error", "", ""},
		ProblemStoreUnavailable:     {503, 503, "api_error", "", "1"},
	}
	if len(cases) != len(defaults.Problems()) {
		t.Fatalf("%d cases for %d problems", len(cases), len(defaults.Problems()))
	}
	for name, c := range cases {
		p := newProblem(c.status, name, "detail of "+name)
		switch c.retryAfter {
		case "2":
			p.RetryAfter = 1500 * time.Millisecond
		case "1":
			p.RetryAfter = time.Millisecond
		}
		if name == ProblemBodyInvalid {
			p.Pointer = "/metadata/order~1id"
		}
		r := httptest.NewRequest("POST", "/v1/x", nil)

		w := httptest.NewRecorder()
		ProblemJSON("")(w, r, p)
		var doc struct {
			Type, Title, Detail, Pointer string
			Status                       int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: problem+json body %q: %v", name, w.Body, err)
		}
		if w.Code != c.status || doc.Status != c.status || doc.Type != DefaultProblemBase+name || doc.Title == "" ||
			doc.Detail != "detail of "+name || w.Header().Get("Content-Type") != "application/problem+json" ||
			w.Header().Get("Retry-After") != c.retryAfter || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: problem+json %d %v %+v", name, w.Code, w.Header(), doc)
		}
		if name == ProblemBodyInvalid && doc.Pointer != p.Pointer {
			t.Errorf("pointer %q, want %q", doc.Pointer, p.Pointer)
		}

		w = httptest.NewRecorder()
		StripeErrors(w, r, p)
		var env struct {
			Error struct{ Type, Code, Message, Param string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s: stripe body %q: %v", name, w.Body, err)
		}
		e := env.Error
		if w.Code != c.stripeStatus || e.Type != c.stripeType || e.Code != c.stripeCode || e.Message == "" ||
			w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: stripe %d %v %+v", name, w.Code, w.Header(), e)
		}
		switch name {
		case ProblemBodyInvalid:
			if e.Param != "metadata[order/id]" {
				t.Errorf("stripe param %q", e.Param)
			}
		case ProblemKeyMissing, ProblemKeyInvalid:
			if e.Param != "Idempotency-Key" {
				t.Errorf("%s: stripe param %q", name, e.Param)
			}
		case ProblemInFlight, ProblemStoreUnavailable:
			if w.Header().Get("Stripe-Should-Retry") != "true" {
				t.Errorf("%s: Stripe-Should-Retry %q", name, w.Header().Get("Stripe-Should-Retry"))
			}
		case ProblemPayloadMismatch:
			if w.Header().Get("Stripe-Should-Retry") != "false" {
				t.Errorf("mismatch: Stripe-Should-Retry %q", w.Header().Get("Stripe-Should-Retry"))
			}
		}
	}
}

func TestStripeParam(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"/amount":          "amount",
		"/items/0/price":   "items[0][price]",
		"/query/limit":     "limit",
		"/header/X-Store":  "X-Store",
		"/shipping/a~0b":   "shipping[a~b]",
		"/query/deep/name": "query[deep][name]",
	} {
		if got := bracketParam(in); got != want {
			t.Errorf("bracketParam(%q) = %q, want %q", in, got, want)
		}
	}
}

// The helpers a ProblemWriter fills an API's own error document with.
func TestProblemHelpers(t *testing.T) {
	p := Problem{Status: 400, Name: ProblemBodyInvalid, Title: "Request body invalid", Pointer: "/items/0/price", RetryAfter: 1500 * time.Millisecond}
	if p.Message() != "Request body invalid" || p.Param() != "items[0][price]" || p.RetryAfterSeconds() != 2 ||
		!slices.Equal(p.Location(), []string{"body", "items", "0", "price"}) {
		t.Errorf("%q %q %d %q", p.Message(), p.Param(), p.RetryAfterSeconds(), p.Location())
	}
	p = Problem{Detail: "d", Pointer: "/query/a~1b"}
	if p.Message() != "d" || !slices.Equal(p.Location(), []string{"query", "a/b"}) || p.RetryAfterSeconds() != 0 {
		t.Errorf("%q %q %d", p.Message(), p.Location(), p.RetryAfterSeconds())
	}
	if loc := (Problem{}).Location(); loc == nil || len(loc) != 0 {
		t.Errorf("no pointer: %#v, want an empty list", loc)
	}
}

// ProblemJSON writes its document by hand: byte for byte what encoding/json writes for the same
// fields (its HTML-safe escaping included), whatever the strings hold.
func TestProblemJSONAsEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "controls \x00\x01\b\f\n\r\t\x1f",
		"<b>&amp;</b>", "line\u2028para\u2029", "bad \xff utf-8 \xe2\x82", "é 日本 🎉", "/items/0/~1x"}
	for _, base := range []string{DefaultProblemBase, "https://example.test/p?<x>&y/"} {
		for i, text := range texts {
			p := Problem{Name: ProblemPayloadMismatch + texts[(i+1)%len(texts)], Title: text, Status: 422 + i,
				Detail: texts[(i+2)%len(texts)], Pointer: texts[(i+3)%len(texts)]}
			want, err := json.Marshal(struct {
				Type    string `json:"type"`
				Title   string `json:"title"`
				Status  int    `json:"status"`
				Detail  string `json:"detail,omitempty"`
				Pointer string `json:"pointer,omitempty"`
			}{base + p.Name, p.Title, p.Status, p.Detail, p.Pointer})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendProblemJSON(nil, base, p); string(got) != string(want) {
				t.Errorf("%+v:\n got %s\nwant %s", p, got, want)
			}
		}
	}
}
