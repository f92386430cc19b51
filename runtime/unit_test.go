package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/gen"
)

// DESIGN section 2 key rules, without a database.
func TestCheckKey(t *testing.T) {
	rule := &KeyRule{Header: "Idempotency-Key", Required: true}
	ok := []struct{ in, want string }{
		{"abcdefghijklmnop", "abcdefghijklmnop"},
		{`"abcdefghijklmnop"`, "abcdefghijklmnop"},    // RFC 8941 sf-string
		{`"abcdefgh\"ijklmnop"`, `abcdefgh"ijklmnop`}, // escaped quote
		{`"abcdefgh\\ijklmnop"`, `abcdefgh\ijklmnop`}, // escaped backslash
		{`ab"cdefghijklmnop`, `ab"cdefghijklmnop`},    // a quote inside an unquoted key
		{"!#$%&'()*+-./:;<=>?@[]^_`{|}~", "!#$%&'()*+-./:;<=>?@[]^_`{|}~"},
	}
	for _, c := range ok {
		got, err := checkKey(Key{Value: c.in, Present: true, lines: 1}, rule, nil)
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	bad := []Key{
		{Value: "abcdefghijklmnop", Present: true, lines: 2},
		{Value: `"abcdefgh ijklmnop"`, Present: true}, // sf-strings allow spaces, keys do not
		{Value: `"abcdefgh"ijklmnop"`, Present: true},
		{Value: `"abcdefghijklmnop\"`, Present: true},
		{Value: "abcdefghijklmno\x7f", Present: true},
		{Value: "abcdefghijklmno\t", Present: true},
		{Value: `""`, Present: true},
	}
	for _, k := range bad {
		if _, err := checkKey(k, rule, nil); err == nil {
			t.Errorf("%q (%d lines) accepted", k.Value, k.lines)
		}
	}
	pat := &KeyRule{MinLength: 4, MaxLength: 8, Pattern: `[a-z]+`}
	m := &gen.Matcher{}
	for in, want := range map[string]bool{"abcd": true, "abcd1": false, "1abcd": false, "abc": false, "abcdefghi": false} {
		if _, err := checkKey(Key{Value: in, Present: true}, pat, m); (err == nil) != want {
			t.Errorf("pattern rule, %q: err %v", in, err)
		}
	}
	// The refusal quotes the pattern as it must match: the whole key.
	if _, err := checkKey(Key{Value: "abcd1", Present: true}, pat, m); err == nil || err.Error() != "the key does not match the pattern ^(?:[a-z]+)$" {
		t.Errorf("pattern refusal: %v", err)
	}
}

func TestIsFinal(t *testing.T) {
	def := &Operation{}
	for status, want := range map[int]bool{200: true, 201: true, 204: true, 400: true, 402: true, 404: true, 422: true,
		408: false, 409: false, 425: false, 429: false, 500: false, 503: false, 302: false, 100: false} {
		if isFinal(def, status) != want {
			t.Errorf("default rules, %d: want final=%v", status, want)
		}
	}
	custom := &Operation{Statuses: []StatusRule{{Class: 2}, {Code: 409}, {Code: 202, Exclude: true}}}
	for status, want := range map[int]bool{200: true, 202: false, 409: true, 404: false} {
		if isFinal(custom, status) != want {
			t.Errorf("custom rules, %d: want final=%v", status, want)
		}
	}
}

func TestStorableHeaders(t *testing.T) {
	op := &Operation{ReplayHeaders: []string{"X-Request-Cost", "Set-Cookie", "Date"}}
	h := http.Header{}
	for _, kv := range [][2]string{
		{"Content-Type", "application/json"}, {"Location", "/a"}, {"Etag", `"v1"`}, {"Link", "<a>; rel=x"},
		{"Link", "<b>; rel=y"}, {"X-Request-Cost", "3"}, {"Set-Cookie", "s=1"}, {"Date", "today"},
		{"Authorization", "Bearer x"}, {"Connection", "close"}, {"X-Other", "no"},
	} {
		h.Add(kv[0], kv[1])
	}
	b, err := storableHeaders(op, h)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"Content-Type": 1, "Location": 1, "Etag": 1, "Link": 2, "X-Request-Cost": 1}
	if len(got) != len(want) {
		t.Fatalf("stored %v", got)
	}
	for k, n := range want {
		if len(got[k]) != n {
			t.Errorf("%s: %v", k, got[k])
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[int64]int{0: 1, 1: 1, 999_999_999: 1, 1_000_000_000: 1, 1_000_000_001: 2, 2_500_000_000: 3} {
		if got := retryAfterSeconds(durationNS(d)); got != want {
			t.Errorf("%dns: %d, want %d", d, got, want)
		}
	}
}

func durationNS(n int64) time.Duration { return time.Duration(n) }

// Fail without a database: body-invalid names the pointer; a second answer is ignored; a
// non-pointer error is a 500 without detail.
func TestFailWithoutStore(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rt, err := New(Config{Pool: pool, SingleTenant: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	x, ok := rt.Begin(w, req("", key1, body100), payOp())
	if !ok {
		t.Fatal(w.Code)
	}
	x.Fail(&BodyError{At: "/amount", Reason: "amount must be positive"})
	x.Fail(errors.New("second answer"))
	x.RunAtomic(x.HeaderKey(), testFingerprint(payOp(), x.Body()), func(context.Context, pgx.Tx) (Response, error) {
		t.Fatal("handler ran after Fail")
		return Response{}, nil
	})
	if w.Code != 400 || problemType(t, w) != ProblemBodyInvalid || !strings.Contains(w.Body.String(), `"pointer":"/amount"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	x, _ = rt.Begin(w, req("", key1, body100), payOp())
	x.Fail(errors.New("database exploded"))
	if w.Code != 500 || strings.Contains(w.Body.String(), "exploded") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// The store is unreachable: 503, Retry-After, and the handler never runs.
	w = httptest.NewRecorder()
	x, _ = rt.Begin(w, req("", key1, body100), payOp())
	x.RunAtomic(x.HeaderKey(), testFingerprint(payOp(), x.Body()), func(context.Context, pgx.Tx) (Response, error) {
		t.Fatal("handler ran without the store")
		return Response{}, nil
	})
	if w.Code != 503 || problemType(t, w) != ProblemStoreUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestNewRequiresScope(t *testing.T) {
	pool, _ := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	defer pool.Close()
	if _, err := New(Config{Pool: pool}); err == nil {
		t.Error("no Scope and no SingleTenant must fail")
	}
	if _, err := New(Config{Pool: pool, SingleTenant: true, Scope: bearerScope}); err == nil {
		t.Error("both Scope and SingleTenant must fail")
	}
	if _, err := New(Config{Scope: bearerScope}); err == nil {
		t.Error("no Pool must fail")
	}
}

// The stored headers come back from PostgreSQL as jsonb prints them (spaces, keys reordered,
// escapes); setStoredHeaders must restore exactly what storableHeaders kept, and set nothing
// from a document that is not an object of string arrays.
func TestSetStoredHeaders(t *testing.T) {
	op := &Operation{ReplayHeaders: []string{"X-Request-Note"}}
	orig := http.Header{
		"Content-Type":   {"application/json"},
		"Location":       {"/v1/payments/pay_1"},
		"Link":           {`</a>; rel="next"`, `</b>; rel="prev"`},
		"X-Request-Note": {"caf\u00e9 \\ \"quoted\"\ttab"},
		"Set-Cookie":     {"secret=1"},
	}
	doc, err := storableHeaders(op, orig)
	if err != nil {
		t.Fatal(err)
	}
	// What jsonb prints: members sorted by length then bytes, ", " and ": " separators.
	var m map[string][]string
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	jsonbLike := strings.ReplaceAll(strings.ReplaceAll(string(doc), `":[`, `": [`), `","`, `", "`)
	for _, d := range []string{string(doc), jsonbLike} {
		h := http.Header{}
		setStoredHeaders(h, []byte(d))
		want := http.Header{}
		for k, v := range orig {
			if k != "Set-Cookie" {
				want[k] = v
			}
		}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("%s:\n got %v\nwant %v", d, h, want)
		}
	}
	for _, bad := range []string{`[]`, `{"A": "x"}`, `{"A": [1]}`, `{"A": ["x"]} x`, `{"A": ["x"]`} {
		h := http.Header{}
		setStoredHeaders(h, []byte(bad))
		if len(h) != 0 {
			t.Errorf("%s: set %v, want nothing", bad, h)
		}
	}
}

// storableHeaders writes its JSON by hand: it must stay valid JSON that decodes to what
// encoding/json would have stored (invalid UTF-8 replaced byte by byte, controls escaped), with
// names sorted and listed once even when an operation repeats a default.
func TestStorableHeadersJSON(t *testing.T) {
	op := &Operation{ReplayHeaders: []string{"x-note", "Location", "X-Note"}}
	h := http.Header{
		"Location":     {"/a\"b\\c"},
		"X-Note":       {"tab\there", "nul-free \x01\x1f", "bad \xff\xfe utf8", "é ✓ \u2028"},
		"Content-Type": {"application/json"},
		"Set-Cookie":   {"no"},
	}
	got, err := storableHeaders(op, h)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"Content-Type": h["Content-Type"], "Location": h["Location"], "X-Note": h["X-Note"]}
	wantJSON, _ := json.Marshal(want)
	var gotMap, wantMap map[string][]string
	if err := json.Unmarshal(got, &gotMap); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	_ = json.Unmarshal(wantJSON, &wantMap)
	if !reflect.DeepEqual(gotMap, wantMap) {
		t.Errorf("got %q\nwant %q", gotMap, wantMap)
	}
	if !strings.HasPrefix(string(got), `{"Content-Type":["application/json"],"Location":`) {
		t.Errorf("names not sorted: %s", got)
	}
	if none, _ := storableHeaders(op, http.Header{"Set-Cookie": {"x"}}); none != nil {
		t.Errorf("no storable header: %s, want nil", none)
	}
}

// readBody trusts Content-Length for its buffer, not for where the body ends: a middleware that
// swapped the body without fixing ContentLength still gets the whole body, within the limit.
func TestReadBodyBeyondContentLength(t *testing.T) {
	for _, tc := range []struct {
		body     string
		announce int64
		limit    int64
		want     string
		tooLarge bool
	}{
		{body: `{"a":1}`, announce: 7, limit: 100, want: `{"a":1}`},
		{body: `{"a":1,"b":2}`, announce: 7, limit: 100, want: `{"a":1,"b":2}`},
		{body: `{"a":1,"b":2}`, announce: -1, limit: 100, want: `{"a":1,"b":2}`},
		{body: `{"a":1,"b":2}`, announce: 7, limit: 10, tooLarge: true},
		{body: `{"a":1,"b":2}`, announce: 10, limit: 10, tooLarge: true},
		{body: ``, announce: 0, limit: 10, want: ``},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
		r.ContentLength = tc.announce
		got, err := readBody(httptest.NewRecorder(), r, tc.limit)
		var mbe *http.MaxBytesError
		switch {
		case tc.tooLarge && !errors.As(err, &mbe):
			t.Errorf("%q announced %d, limit %d: err %v, want a MaxBytesError", tc.body, tc.announce, tc.limit, err)
		case !tc.tooLarge && (err != nil || string(got) != tc.want):
			t.Errorf("%q announced %d: got %q, %v", tc.body, tc.announce, got, err)
		}
	}
}
