package runtime

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// The Agentic Commerce Protocol's row: a key is scoped to the endpoint path (the same key on
// another session's path runs again, on the same path it replays), the key and a Request-Id
// the client sent are echoed (a replay carries its own request's id, a request without one gets
// none), and errors are ACP's flat object with its codes.
func TestProfileACP(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Path = "/v1/sessions/{id}/pay"
	NamedProfile("acp").Apply(op)
	if op.Scope != ScopePath || op.Key.Characters != KeyOpaque || op.Key.MinLength != 1 || op.Key.MaxLength != 255 {
		t.Fatalf("NamedProfile(acp).Apply: %+v", op)
	}
	h := e.atomicHandler(op)
	at := func(path, tenant, key, body string, extra ...string) *httptest.ResponseRecorder {
		r := req(tenant, key, body, extra...)
		r.URL.Path = path
		return serveReq(h, r)
	}
	const k = "an opaque key, with spaces"
	a := at("/v1/sessions/s1/pay", "t1", k, body100, "Request-Id", "req_a")
	if a.Code != 201 || a.Header().Get("Idempotency-Key") != k || a.Header().Get("Request-Id") != "req_a" {
		t.Fatalf("first: %d %v", a.Code, a.Header())
	}
	replay := at("/v1/sessions/s1/pay", "t1", k, body100, "Request-Id", "req_b")
	if replay.Code != 201 || replay.Header().Get(HeaderReplayed) != "true" || replay.Header().Get("Request-Id") != "req_b" {
		t.Errorf("replay: %d %v", replay.Code, replay.Header())
	}
	if w := at("/v1/sessions/s1/pay", "t1", k, body100); w.Header().Get("Request-Id") != "" || w.Header().Get(HeaderReplayed) != "true" {
		t.Errorf("a replay without a Request-Id carries one: %v", w.Header())
	}
	// Another session's path: another request, although the key and body are the same.
	other := at("/v1/sessions/s2/pay", "t1", k, body100)
	if other.Code != 201 || other.Header().Get(HeaderReplayed) != "" {
		t.Errorf("another path: %d %v", other.Code, other.Header())
	}
	if e.payments("t1") != 2 {
		t.Errorf("payments %d, want 2 (one per session path)", e.payments("t1"))
	}
	// A path value that spells another's framing: still its own record.
	if w := at("/v1/sessions/s1%1F2:s1/pay", "t1", k, body100); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("a crafted path value: %d %v", w.Code, w.Header())
	}

	type acpError struct {
		Type, Code, Message, Param string
	}
	read := func(w *httptest.ResponseRecorder) acpError {
		t.Helper()
		var doc acpError
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("not ACP's error object: %v %v %s", err, w.Header(), w.Body)
		}
		return doc
	}
	mis := at("/v1/sessions/s1/pay", "t1", k, `{"amount":7}`)
	if d := read(mis); mis.Code != 422 || d.Type != "invalid_request" || d.Code != "idempotency_conflict" || d.Message == "" ||
		mis.Header().Get("Idempotency-Key") != k {
		t.Errorf("mismatch: %d %+v %v", mis.Code, d, mis.Header())
	}
	missing := at("/v1/sessions/s1/pay", "t1", "", body100)
	if d := read(missing); missing.Code != 400 || d.Code != "idempotency_key_required" {
		t.Errorf("missing key: %d %+v", missing.Code, d)
	}
	long := at("/v1/sessions/s1/pay", "t1", strings.Repeat("k", 256), body100)
	if d := read(long); long.Code != 400 || d.Type != "invalid_request" || d.Code != "idempotency_key_required" {
		t.Errorf("a key of 256 characters: %d %+v", long.Code, d)
	}
	bad := at("/v1/sessions/s1/pay", "t1", "k2", `{"amount":-1}`)
	if d := read(bad); bad.Code != 400 || d.Code != "invalid" || d.Param != "$.amount" {
		t.Errorf("a body the decoder refuses: %d %+v", bad.Code, d)
	}
}

// The ACP envelope names a body member as an RFC 9535 JSONPath, an unsupported API-Version with
// the versions the parameter's enum allows, and a problem the row gives no code with its name.
func TestACPEnvelope(t *testing.T) {
	write := NamedProfile("acp").Problems
	doc := func(p Problem) map[string]any {
		t.Helper()
		w := httptest.NewRecorder()
		write(w, httptest.NewRequest("POST", "/", nil), p)
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
		return m
	}
	for ptr, want := range map[string]string{
		"/line_items/0/id": "$.line_items[0].id",
		"/buyer/email":     "$.buyer.email",
		"/tip amount":      "$['tip amount']",
		"/a~1b/it's":       "$['a/b']['it\\'s']",
		"/metadata/07":     "$.metadata['07']",
		"/header/X-Store":  "",
	} {
		got, _ := doc(Problem{Name: ProblemBodyInvalid, Status: 400, Pointer: ptr})["param"].(string)
		if got != want {
			t.Errorf("param of %s = %q, want %q", ptr, got, want)
		}
	}
	v := doc(Problem{Name: ProblemBodyInvalid, Status: 400, Pointer: "/header/API-Version", Detail: "no", Allowed: []string{"2026-04-17"}})
	if v["code"] != "unsupported_api_version" || v["type"] != "invalid_request" || len(v["supported_versions"].([]any)) != 1 {
		t.Errorf("unsupported API-Version: %v", v)
	}
	if s := doc(Problem{Name: ProblemBodyTooLarge, Status: 413}); s["code"] != "body_too_large" || s["type"] != "invalid_request" {
		t.Errorf("a problem without a code of its own: %v", s)
	}
	if s := doc(Problem{Name: ProblemStoreUnavailable, Status: 503}); s["type"] != "service_unavailable" {
		t.Errorf("store unavailable: %v", s)
	}
}
