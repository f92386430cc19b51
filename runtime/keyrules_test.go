package runtime

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// key.characters and key.quoted: the syntax of a key as data (runtime/defaults, keys.go).
func TestKeySyntaxSettings(t *testing.T) {
	var m gen.Matcher
	for _, c := range []struct {
		name  string
		rule  KeyRule
		in    string
		want  string // "" when refused
		quote bool
	}{
		{"visible refuses a space", KeyRule{MinLength: 1}, "a b", "", false},
		{"visible refuses a comma", KeyRule{MinLength: 1}, "a,b", "", false},
		{"opaque takes a space and a comma", KeyRule{MinLength: 1, Characters: KeyOpaque}, "a b,c", "a b,c", false},
		{"opaque takes text", KeyRule{MinLength: 1, Characters: KeyOpaque}, "clé ñ 鍵", "clé ñ 鍵", false},
		{"opaque counts characters", KeyRule{MinLength: 1, MaxLength: 3, Characters: KeyOpaque}, "鍵鍵鍵", "鍵鍵鍵", false},
		{"opaque over its length", KeyRule{MinLength: 1, MaxLength: 2, Characters: KeyOpaque}, "鍵鍵鍵", "", false},
		{"opaque refuses a control character", KeyRule{MinLength: 1, Characters: KeyOpaque}, "a\tb", "", false},
		{"opaque refuses C1", KeyRule{MinLength: 1, Characters: KeyOpaque}, "a\u0085b", "", false},
		{"opaque refuses bad UTF-8", KeyRule{MinLength: 1, Characters: KeyOpaque}, "a\xffb", "", false},
		{"opaque takes U+FFFD", KeyRule{MinLength: 1, Characters: KeyOpaque}, "a\uFFFDb", "a\uFFFDb", false},
		{"accept unquotes", KeyRule{MinLength: 1}, `"abc"`, "abc", true},
		{"accept takes a bare key", KeyRule{MinLength: 1}, `abc`, "abc", false},
		{"accept refuses a broken quoted key", KeyRule{MinLength: 1}, `"abc`, "", false},
		{"opaque quoted keeps its space", KeyRule{MinLength: 1, Characters: KeyOpaque}, `"a b"`, "a b", true},
		{"require takes a quoted key", KeyRule{MinLength: 1, Quoted: KeyQuotedRequired}, `"abc"`, "abc", true},
		{"require refuses a bare key", KeyRule{MinLength: 1, Quoted: KeyQuotedRequired}, `abc`, "", false},
		{"literal keeps the quotes", KeyRule{MinLength: 1, Quoted: KeyQuotedLiteral}, `"abc"`, `"abc"`, false},
		{"literal takes a lone quote", KeyRule{MinLength: 1, Quoted: KeyQuotedLiteral, Characters: KeyOpaque}, `"a b`, `"a b`, false},
	} {
		got, quoted, err := checkKey(rawKey{value: c.in, present: true, lines: 1}, &c.rule, m.MatchWhole)
		if (err == nil) != (c.want != "") || got != c.want || quoted != c.quote {
			t.Errorf("%s: %q gives %q (quoted %v), %v; want %q (quoted %v)", c.name, c.in, got, quoted, err, c.want, c.quote)
		}
	}
}

// An optional key never refuses a browser's key: Firefox sends `Idempotency-Key: "<uint64>"`
// on every POST, which is 15 digits or fewer about once in 18,000 requests (below the default
// minimum of 16) and never matches a key pattern of letters. Such a request runs unguarded, as
// without a key; a key the client sent bare that breaks the rules is still 400, and so is a
// browser's key on an operation whose key is required.
func TestOptionalKeyNeverRefusesABrowsersKey(t *testing.T) {
	e := newMemEnv(t, nil)
	optional := payOp()
	optional.Key.Required = false
	patterned := payOp()
	patterned.Key.Required, patterned.Key.Pattern = false, `key_[a-z]+`
	for name, op := range map[string]*Operation{"short": optional, "pattern": patterned} {
		h := e.atomicHandler(op)
		before := e.payments("t-" + name)
		for range 2 {
			if w := serveReq(h, req("t-"+name, `"123456789012345"`, body100)); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("%s: a browser's key answered %d %s", name, w.Code, w.Body)
			}
		}
		if n := e.payments("t-"+name) - before; n != 2 {
			t.Errorf("%s: %d payments, want 2 (the request runs unguarded, as without a key)", name, n)
		}
		if w := serveReq(h, req("t-"+name, "123456789012345", body100)); w.Code != 400 || problemType(t, w) != "key-invalid" {
			t.Errorf("%s: a bare key that breaks the rules answered %d, want 400 key-invalid", name, w.Code)
		}
		two := req("t-"+name, `"123456789012345"`, body100)
		two.Header.Add("Idempotency-Key", `"123456789012346"`)
		if w := serveReq(h, two); w.Code != 400 {
			t.Errorf("%s: two key lines answered %d, want 400", name, w.Code)
		}
	}
	// A browser's key that the rules take guards the request like any key.
	h := e.atomicHandler(optional)
	serveReq(h, req("t-long", `"12345678901234567"`, body100))
	if w := serveReq(h, req("t-long", `"12345678901234567"`, body100)); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("a valid browser's key was not replayed: %d", w.Code)
	}
	if w := serveReq(e.atomicHandler(payOp()), req("t-req", `"123456789012345"`, body100)); w.Code != 400 || problemType(t, w) != "key-invalid" {
		t.Errorf("a required key: a browser's short key answered %d, want 400 key-invalid", w.Code)
	}
}

// key.echo repeats the key header on every answer as the request sent it, also on a refusal
// before the key was read, and never a key longer than a valid one.
func TestEchoKeySetting(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key.Echo = true
	h := e.atomicHandler(op)
	for _, key := range []string{key1, `"` + key1 + `-q"`} {
		first := serveReq(h, req("t1", key, body100))
		again := serveReq(h, req("t1", key, body100))
		bad := serveReq(h, req("t1", key, `{"amount":-1}`))
		for i, w := range []*http.Response{first.Result(), again.Result(), bad.Result()} {
			if got := w.Header.Get("Idempotency-Key"); got != key {
				t.Errorf("%s, answer %d (%d): echoed %q", key, i, w.StatusCode, got)
			}
		}
	}
	long := strings.Repeat("k", DefaultKeyMaxLength+1)
	if w := serveReq(h, req("t1", long, body100)); w.Code != 400 || w.Header().Get("Idempotency-Key") != "" {
		t.Errorf("an over-long key: %d, echoed %q", w.Code, w.Header().Get("Idempotency-Key"))
	}
	if w := serveReq(e.atomicHandler(payOp()), req("t1", key1+"-x", body100)); w.Header().Get("Idempotency-Key") != "" {
		t.Error("echoed without key.echo or a profile that echoes")
	}
}

// An opaque key may hold a space; under scope tenant it never names the record of a
// scope-operation key of another operation ("createRefund abc" is not createRefund's abc).
func TestOpaqueKeyRecordsStayApart(t *testing.T) {
	tenantOp := &Operation{ID: "createPayment", Key: KeyRule{Characters: KeyOpaque}}
	perOp := &Operation{ID: "createRefund", Scope: ScopeOperation}
	if tenantOp.RecordKey("createRefund abc") == perOp.RecordKey("abc") {
		t.Errorf("record keys meet: %q", perOp.RecordKey("abc"))
	}
	if tenantOp.RecordKey("abc") != "abc" || perOp.RecordKey("abc") != "createRefund abc" {
		t.Error("the record key of a key without a space changed: records written before would not be found")
	}
}

// A handler reads its request's key (IdempotencyKey), and marks an answer that must not be
// stored (NotFinal): the corrected retry under the same key runs instead of replaying it.
func TestHandlerKeyAndNotFinal(t *testing.T) {
	e := newMemEnv(t, nil)
	var seen []string
	h := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(ctx context.Context, db *memstore.DB, r *payReq) (Response, error) {
		k, ok := IdempotencyKey(ctx)
		seen = append(seen, k)
		if !ok {
			t.Error("IdempotencyKey: no key inside an idempotent request")
		}
		if r.Header.Get("API-Version") != "2026-01-16" {
			NotFinal(ctx)
			e.pay(db, r) // rolled back with the answer that is not final
			return Response{Status: 400, Body: []byte(`{"code":"unsupported_api_version"}`)}, nil
		}
		id := e.pay(db, r)
		return e.answer(ctx, r, id)
	}))
	if w := serveReq(h, req("t1", `"`+key1+`"`, body100, "API-Version", "2020-01-01")); w.Code != 400 {
		t.Fatalf("old version: %d", w.Code)
	}
	if n := e.payments("t1"); n != 0 {
		t.Errorf("a write of the answer that is not final was kept: %d payments", n)
	}
	w := serveReq(h, req("t1", key1, body100, "API-Version", "2026-01-16"))
	if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || e.payments("t1") != 1 {
		t.Fatalf("the corrected retry answered %d (replayed %q), %d payments; want it run", w.Code, w.Header().Get("Idempotent-Replayed"), e.payments("t1"))
	}
	if w := serveReq(h, req("t1", key1, body100, "API-Version", "2026-01-16")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Error("the final answer was not stored")
	}
	if strings.Join(seen, ",") != key1+","+key1 {
		t.Errorf("keys seen by the handler: %v (the quoted key's is its content)", seen)
	}
	if k, ok := IdempotencyKey(context.Background()); ok || k != "" {
		t.Error("IdempotencyKey outside a request")
	}
	NotFinal(context.Background()) // does nothing
}

// Behind the Middleware: an unmarked POST carrying a browser's key is passed through untouched,
// and a wrapped handler reads the key and marks a refusal not final through r.Context().
func TestMiddlewareBrowserKeyAndNotFinal(t *testing.T) {
	e := newMemEnv(t, nil)
	mux := http.NewServeMux()
	unmarked := 0
	mux.HandleFunc("POST /v1/notes", func(w http.ResponseWriter, r *http.Request) {
		unmarked++
		w.WriteHeader(http.StatusCreated)
	})
	var keys []string
	mux.HandleFunc("POST /v1/payments", func(w http.ResponseWriter, r *http.Request) {
		k, _ := IdempotencyKey(r.Context())
		keys = append(keys, k)
		if r.Header.Get("API-Version") != "2026-04-17" {
			NotFinal(r.Context())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		db, _ := TxFrom[*memstore.DB](r.Context())
		tenant, _ := bearerScope(r)
		e.pay(db, &payReq{Amount: 1, Tenant: tenant})
		w.WriteHeader(http.StatusCreated)
	})
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(mux)
	note := req("t1", `"42"`, `{}`)
	note.URL.Path = "/v1/notes"
	if w := serveReq(h, note); w.Code != 201 || unmarked != 1 {
		t.Errorf("an unmarked POST with a browser's key: %d, handler ran %d times", w.Code, unmarked)
	}
	if w := serveReq(h, req("t1", key1, body100, "API-Version", "1999-01-01")); w.Code != 400 {
		t.Fatalf("old version: %d", w.Code)
	}
	if w := serveReq(h, req("t1", key1, body100, "API-Version", "2026-04-17")); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("the corrected retry: %d, replayed %q; want it run", w.Code, w.Header().Get(HeaderReplayed))
	}
	if w := serveReq(h, req("t1", key1, body100, "API-Version", "2026-04-17")); w.Header().Get(HeaderReplayed) != "true" {
		t.Error("the final answer was not stored")
	}
	if strings.Join(keys, ",") != key1+","+key1 || e.payments("t1") != 1 {
		t.Errorf("keys seen %v, %d payments", keys, e.payments("t1"))
	}
}
