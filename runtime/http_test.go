package runtime

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// Tests of the HTTP layer's admission (scope, size, content coding, media type) and of what it
// hands the decoder, without a store: a probe decoder records what it saw and stops the request.

// probeResult is what the probe decoder saw; admitted is false when the layer refused the
// request before decoding.
type probeResult struct {
	admitted            bool
	mediaType, declared string
	w                   *httptest.ResponseRecorder
}

// probe sends one request with body and header pairs to an operation served by the layer.
func probe(t *testing.T, op *Operation, body string, header ...string) probeResult {
	t.Helper()
	rt, err := New(Config{Store: memstore.New(nil), SingleTenant: true, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	var res probeResult
	stop := &gen.BodyError{At: "/probe", Reason: "probe stops here"}
	h := AtomicHandler(rt, op, BindAtomic(func(in *gen.Input) (struct{}, error) {
		res.admitted, res.mediaType, res.declared = true, in.MediaType, in.Declared
		return struct{}{}, stop
	}, func(context.Context, *memstore.DB, *struct{}) (Response, error) {
		t.Fatal("the handler ran after its decoder refused the request")
		return Response{}, nil
	}))
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	res.w = serveReq(h, r)
	if res.admitted && (res.w.Code != 400 || problemOf(t, res.w).doc.Pointer != "/probe") {
		t.Fatalf("admitted request: %d %s, want the probe's 400", res.w.Code, res.w.Body)
	}
	return res
}

// RFC 9110 section 12.5.1: a declared media range admits every type in it (a Swagger 2.0 body
// parameter without `consumes` is "*/*").
func TestBeginMediaRanges(t *testing.T) {
	cases := []struct {
		declared     []string
		ct           string
		ok           bool
		mediaType    string // gen.Input.MediaType: the request's own type
		declaredType string // gen.Input.Declared: the entry that admitted it
	}{
		{[]string{"*/*"}, "application/json", true, "application/json", "*/*"},
		{[]string{"*/*"}, "Text/Plain; charset=us-ascii", true, "text/plain", "*/*"},
		{[]string{"application/*"}, "application/xml", true, "application/xml", "application/*"},
		{[]string{"application/*"}, "text/plain", false, "", ""},
		{[]string{"application/*", "*/*"}, "application/xml", true, "application/xml", "application/*"},
		{[]string{"*/*", "application/*"}, "application/xml", true, "application/xml", "application/*"},
		{[]string{"*/*", "application/json"}, "application/json", true, "application/json", "application/json"},
		{[]string{"application/*", "application/json"}, "application/json", true, "application/json", "application/json"},
		{[]string{"application/json", "*/*"}, "text/csv", true, "text/csv", "*/*"},
		{[]string{"application/json"}, "application/xml", false, "", ""},
		{[]string{"application/json"}, "Application/JSON", true, "application/json", "application/json"},
		// A request names one media type: a range as Content-Type is not one.
		{[]string{"*/*"}, "*/*", false, "", ""},
		{[]string{"application/*"}, "application/*", false, "", ""},
		{[]string{"*/*"}, "not a media type", false, "", ""},
	}
	for _, c := range cases {
		op := &Operation{ID: "op", MediaTypes: c.declared}
		res := probe(t, op, "{}", "Content-Type", c.ct)
		if res.admitted != c.ok {
			t.Errorf("%v, %q: admitted %v, want %v (%d %s)", c.declared, c.ct, res.admitted, c.ok, res.w.Code, res.w.Body)
			continue
		}
		if !res.admitted {
			if res.w.Code != http.StatusUnsupportedMediaType || problemType(t, res.w) != ProblemMediaTypeUnsupported {
				t.Errorf("%v, %q: %d %s, want 415 media-type-unsupported", c.declared, c.ct, res.w.Code, res.w.Body)
			}
			continue
		}
		if res.mediaType != c.mediaType || res.declared != c.declaredType {
			t.Errorf("%v, %q: MediaType %q Declared %q, want %q %q", c.declared, c.ct, res.mediaType, res.declared, c.mediaType, c.declaredType)
		}
	}
	// An operation without a body takes a request without one, with no media type.
	if res := probe(t, &Operation{ID: "op"}, ""); !res.admitted || res.mediaType != "" || res.declared != "" {
		t.Errorf("no body: admitted %v, %q %q", res.admitted, res.mediaType, res.declared)
	}
}

// RFC 8259 section 8.1: JSON is UTF-8, so a JSON body declaring another charset is 415, not
// decoded as if it were UTF-8.
func TestBeginJSONCharset(t *testing.T) {
	op := &Operation{ID: "op", MediaTypes: []string{"application/json", "application/merge-patch+json", "text/plain"}}
	for ct, want := range map[string]bool{
		"application/json":                          true,
		"application/json; charset=utf-8":           true,
		"application/json; charset=UTF-8":           true,
		`application/json; charset="utf-8"`:         true,
		"application/json; charset=latin1":          false,
		"application/json; charset=iso-8859-1":      false,
		"application/json; charset=utf-16":          false,
		"application/merge-patch+json; charset=gbk": false,
		"text/plain; charset=latin1":                true, // raw bytes: the charset is the client's business
	} {
		res := probe(t, op, "{}", "Content-Type", ct)
		if res.admitted != want {
			t.Errorf("%q: admitted %v, want %v (%d %s)", ct, res.admitted, want, res.w.Code, res.w.Body)
			continue
		}
		if !res.admitted && (res.w.Code != http.StatusUnsupportedMediaType || problemType(t, res.w) != ProblemMediaTypeUnsupported ||
			!strings.Contains(res.w.Body.String(), "UTF-8")) {
			t.Errorf("%q: %d %s, want 415 media-type-unsupported naming UTF-8", ct, res.w.Code, res.w.Body)
		}
	}
}

// RFC 9110 section 15.5.16: a content coding the server does not apply is 415 with
// Accept-Encoding: identity.
func TestBeginContentEncoding(t *testing.T) {
	op := &Operation{ID: "op", MediaTypes: []string{"application/json"}}
	for _, enc := range [][]string{{"gzip"}, {"br"}, {"identity, gzip"}, {"identity", "deflate"}} {
		h := []string{"Content-Type", "application/json"}
		for _, e := range enc {
			h = append(h, "Content-Encoding", e)
		}
		res := probe(t, op, "\x1f\x8b\x08\x00", h...)
		if res.admitted || res.w.Code != http.StatusUnsupportedMediaType || problemType(t, res.w) != ProblemMediaTypeUnsupported {
			t.Errorf("%q: %d %s, want 415 media-type-unsupported", enc, res.w.Code, res.w.Body)
			continue
		}
		if !strings.Contains(res.w.Body.String(), "Content-Encoding") || res.w.Header().Get("Accept-Encoding") != "identity" {
			t.Errorf("%q: detail %s, Accept-Encoding %q", enc, res.w.Body, res.w.Header().Get("Accept-Encoding"))
		}
	}
	for _, enc := range []string{"identity", "IDENTITY", ""} {
		if res := probe(t, op, "{}", "Content-Type", "application/json", "Content-Encoding", enc); !res.admitted {
			t.Errorf("Content-Encoding %q: %d %s", enc, res.w.Code, res.w.Body)
		}
	}
}

// pointerErr is a decoder's own error type that names a pointer through a method.
type pointerErr struct{}

func (pointerErr) Error() string   { return "custom refusal" }
func (pointerErr) Pointer() string { return "/custom" }

// A decoder's refusal is 400 body-invalid naming its pointer (gen.BodyError, canonical.Error or
// any error with a Pointer method, also wrapped); any other error is a bug in the decoder, 500
// without detail. Neither runs the handler or touches the store.
func TestDecodeErrors(t *testing.T) {
	e := newMemEnv(t, nil)
	ran := 0
	for _, c := range []struct {
		err     error
		status  int
		pointer string
		outcome Outcome
	}{
		{&gen.BodyError{At: "/amount", Reason: "amount must be positive"}, 400, "/amount", OutcomeBodyInvalid},
		{&canonical.Error{Pointer: "/lines/0", Offset: 3, Reason: "duplicate member"}, 400, "/lines/0", OutcomeBodyInvalid},
		{pointerErr{}, 400, "/custom", OutcomeBodyInvalid},
		{errors.Join(errors.New("context"), &gen.BodyError{At: "/query/limit", Reason: "not a number"}), 400, "/query/limit", OutcomeBodyInvalid},
		{errors.New("database exploded"), 500, "", OutcomeInternal},
		// A multipart part over limits.part.
		{&gen.BodyError{At: "/file", Reason: "part \"file\" is larger than the limit", Status: 413}, 413, "/file", OutcomeBodyInvalid},
	} {
		h := AtomicHandler(e.rt, payOp(), BindAtomic(func(*gen.Input) (payReq, error) { return payReq{}, c.err },
			func(context.Context, *memstore.DB, *payReq) (Response, error) { ran++; return Response{}, nil }))
		before := e.obs.get(c.outcome)
		w := serveReq(h, req("t1", key1, body100))
		p := problemOf(t, w)
		switch {
		case w.Code != c.status:
			t.Errorf("%v: %d %s, want %d", c.err, w.Code, w.Body, c.status)
		case c.status == 400 && (p.name != ProblemBodyInvalid || p.doc.Pointer != c.pointer):
			t.Errorf("%v: %s, want body-invalid at %s", c.err, w.Body, c.pointer)
		case c.status == 413 && (p.name != ProblemBodyTooLarge || p.doc.Pointer != c.pointer || !strings.Contains(p.doc.Detail, "larger than the limit")):
			t.Errorf("%v: %s, want body-too-large at %s", c.err, w.Body, c.pointer)
		case c.status == 500 && (p.name != ProblemInternal || strings.Contains(w.Body.String(), "exploded")):
			t.Errorf("%v: %s, want internal without the error's text", c.err, w.Body)
		}
		if e.obs.get(c.outcome) != before+1 {
			t.Errorf("%v: outcomes %v, want one more %s", c.err, e.obs, c.outcome)
		}
	}
	if ran != 0 {
		t.Errorf("the handler ran %d times", ran)
	}
	if _, found := e.record("t1", key1); found {
		t.Error("a refused request left a record")
	}
	if !strings.Contains(e.logs.String(), "database exploded") {
		t.Errorf("the decoder's unexpected error is not logged: %s", e.logs)
	}
}

// pathValue finds path parameters by matching the operation's template against the end of the
// escaped path, whatever prefix a router added.
func TestPathValue(t *testing.T) {
	op := &Operation{Path: "/v1/shops/{shop}/orders/{order_id}.json"}
	for _, c := range []struct{ path, shop, order string }{
		{"/v1/shops/s1/orders/o-7.json", "s1", "o-7"},
		{"/api/v1/shops/s1/orders/o-7.json", "s1", "o-7"},
		{"/v1/shops/a%2Fb/orders/o%207.json", "a/b", "o 7"},
		{"/v1/shops/s1/orders/o-7.xml", "s1", ""},
		{"/orders/o-7.json", "", ""},
	} {
		x := &exchange{op: op, r: httptest.NewRequest("POST", c.path, nil)}
		if got := x.pathValue("shop"); got != c.shop {
			t.Errorf("%s: shop %q, want %q", c.path, got, c.shop)
		}
		if got := x.pathValue("order_id"); got != c.order {
			t.Errorf("%s: order_id %q, want %q", c.path, got, c.order)
		}
		if got := x.pathValue("none"); got != "" {
			t.Errorf("%s: unknown parameter %q", c.path, got)
		}
	}
}

// The runtime frames what the decoder does not: operation, method, path template and values,
// the declared query parameters and the fingerprint headers. A change in any of them with the
// same key and body is another request (422); undeclared query parameters and other headers
// are not part of it (replay).
func TestFingerprintFraming(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Path = "/v1/shops/{shop}/payments"
	op.Query = []string{"dry_run", "expand"}
	op.FingerprintHeaders = []string{"X-Account"}
	h := e.atomicHandler(op)
	send := func(key, target string, extra ...string) *httptest.ResponseRecorder {
		r := req("t1", key, body100, extra...)
		r.URL.Path, r.URL.RawQuery, _ = strings.Cut(target, "?")
		return serveReq(h, r)
	}
	base := "/v1/shops/s1/payments?expand=a&dry_run=false"
	for i, c := range []struct {
		target string
		extra  []string
		want   int
	}{
		{base + "&utm=x", []string{"X-Account", "acc1", "X-Other", "z"}, 201}, // replay: undeclared parts differ
		{"/v1/shops/s1/payments?dry_run=false&expand=a", []string{"X-Account", "acc1"}, 201},
		{"/v1/shops/s2/payments?expand=a&dry_run=false", []string{"X-Account", "acc1"}, 422},
		{"/v1/shops/s1/payments?expand=b&dry_run=false", []string{"X-Account", "acc1"}, 422},
		{"/v1/shops/s1/payments?expand=a", []string{"X-Account", "acc1"}, 422},
		{base, []string{"X-Account", "acc2"}, 422},
		{base, nil, 422},
	} {
		key := "k-framing-" + string(rune('a'+i)) + "-000000000"
		if w := send(key, base, "X-Account", "acc1"); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("case %d: first request: %d %s", i, w.Code, w.Body)
		}
		w := send(key, c.target, c.extra...)
		if w.Code != c.want || (c.want == 201) != (w.Header().Get(HeaderReplayed) == "true") {
			t.Errorf("case %d (%s %v): %d replayed %q, want %d", i, c.target, c.extra, w.Code, w.Header().Get(HeaderReplayed), c.want)
		}
	}
}

// A body-carried key (key.body) is what the decoder reports with SetBodyKey: absent is
// key-missing (even if the decoder saw the field required), malformed is key-invalid, and a
// valid one guards the request like a header key.
func TestBodyCarriedKey(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key = KeyRule{BodyPointer: "/idempotency_key", Required: true}
	decode := func(in *gen.Input) (payReq, error) {
		v, err := decodePay(in)
		if k := in.Request.Header.Get("X-Body-Key"); k != "" {
			in.SetBodyKey(k, true)
		} else {
			in.SetBodyKey("", false)
		}
		return v, err
	}
	runs := 0
	h := AtomicHandler(e.rt, op, BindAtomic(decode, func(ctx context.Context, db *memstore.DB, r *payReq) (Response, error) {
		runs++
		return Response{Status: 201, Body: []byte("ok")}, nil
	}))
	w := serveReq(h, req("t1", key1, body100)) // a header key does not count
	if w.Code != 400 || problemType(t, w) != ProblemKeyMissing || !strings.Contains(w.Body.String(), "/idempotency_key") {
		t.Errorf("absent: %d %s", w.Code, w.Body)
	}
	if w := serveReq(h, req("t1", "", body100, "X-Body-Key", "short")); w.Code != 400 || problemType(t, w) != ProblemKeyInvalid {
		t.Errorf("invalid: %d %s", w.Code, w.Body)
	}
	for i := range 2 {
		w := serveReq(h, req("t1", "", body100, "X-Body-Key", key1))
		if w.Code != 201 || (i == 1) != (w.Header().Get(HeaderReplayed) == "true") {
			t.Errorf("request %d: %d %v", i, w.Code, w.Header())
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}

// A query-carried key (key.query, AIP-155's request_id) is read from the URL: a key header does
// not stand in for it, an empty or second value is key-invalid, the problem names the
// parameter, and a valid one guards the request like a header key.
func TestQueryCarriedKey(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key = KeyRule{Query: "request_id", Required: true}
	runs := 0
	h := AtomicHandler(e.rt, op, BindAtomic(decodePay, func(ctx context.Context, db *memstore.DB, r *payReq) (Response, error) {
		runs++
		return Response{Status: 201, Body: []byte("ok")}, nil
	}))
	at := func(query string) *http.Request {
		r := req("t1", "", body100)
		r.URL.RawQuery = query
		return r
	}
	w := serveReq(h, req("t1", key1, body100)) // a header key does not count
	if w.Code != 400 || problemType(t, w) != ProblemKeyMissing || !strings.Contains(w.Body.String(), "request_id query parameter") {
		t.Errorf("absent: %d %s", w.Code, w.Body)
	}
	for _, q := range []string{"request_id=", "request_id=short", "request_id=" + key1 + "&request_id=" + key1} {
		if w := serveReq(h, at(q)); w.Code != 400 || problemType(t, w) != ProblemKeyInvalid {
			t.Errorf("%s: %d %s", q, w.Code, w.Body)
		}
	}
	for i := range 2 {
		w := serveReq(h, at("request_id="+key1))
		if w.Code != 201 || (i == 1) != (w.Header().Get(HeaderReplayed) == "true") {
			t.Errorf("request %d: %d %v", i, w.Code, w.Header())
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}
