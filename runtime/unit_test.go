package runtime

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// docs/design.md section 2 key rules, without a store.
func TestCheckKey(t *testing.T) {
	var m gen.Matcher
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
		got, _, err := checkKey(rawKey{value: c.in, present: true, lines: 1}, rule, m.MatchWhole)
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	bad := []rawKey{
		{value: "abcdefghijklmnop", present: true, lines: 2},
		{value: `"abcdefgh ijklmnop"`, present: true}, // sf-strings allow spaces, keys do not
		{value: `"abcdefgh"ijklmnop"`, present: true},
		{value: `"abcdefghijklmnop\"`, present: true},
		{value: "abcdefghijklmno\x7f", present: true},
		{value: "abcdefghijklmno\t", present: true},
		{value: `""`, present: true},
	}
	for _, k := range bad {
		if _, _, err := checkKey(k, rule, m.MatchWhole); err == nil {
			t.Errorf("%q (%d lines) accepted", k.value, k.lines)
		}
	}
	// The pattern must match the whole key (the runtime anchors it), in ECMA-262 syntax.
	pat := &KeyRule{MinLength: 4, MaxLength: 8, Pattern: `[a-z]+`}
	for in, want := range map[string]bool{"abcd": true, "abcd1": false, "1abcd": false, "abc": false, "abcdefghi": false} {
		if _, _, err := checkKey(rawKey{value: in, present: true}, pat, m.MatchWhole); (err == nil) != want {
			t.Errorf("pattern rule, %q: err %v", in, err)
		}
	}
	// An alternation must not escape the anchors: "a|b" is the whole key a or b.
	alt := &KeyRule{MinLength: 1, Pattern: `ab|cd`}
	for in, want := range map[string]bool{"ab": true, "cd": true, "abx": false, "xcd": false} {
		if _, _, err := checkKey(rawKey{value: in, present: true}, alt, m.MatchWhole); (err == nil) != want {
			t.Errorf("alternation, %q: err %v", in, err)
		}
	}
}

// A value starting with DQUOTE is an RFC 8941 String Item; parameters after it are not part of
// the key and must not be stored as if they were.
func TestCheckKeyQuotedWithParameters(t *testing.T) {
	var m gen.Matcher
	rule := &KeyRule{Header: "Idempotency-Key", Required: true}
	for _, in := range []string{
		`"k0123456789abcdef";a=1`,
		`"k0123456789abcdef"; a=1`,
		`"k0123456789abcdef";a`,
	} {
		got, _, err := checkKey(rawKey{value: in, present: true, lines: 1}, rule, m.MatchWhole)
		if err == nil {
			t.Errorf("%q accepted as key %q", in, got)
			continue
		}
		if !strings.Contains(err.Error(), "parameters are not part of the key") {
			t.Errorf("%q: reason %q does not say parameters are not part of the key", in, err)
		}
	}
	for _, in := range []string{
		`"k0123456789abcdef"x`,  // trailing characters
		`"k0123456789abcdef`,    // no closing quote
		`"k0123456789abcdef\"`,  // the closing quote is escaped
		`"k0123456789abcdef"""`, // two strings
	} {
		if got, _, err := checkKey(rawKey{value: in, present: true, lines: 1}, rule, m.MatchWhole); err == nil {
			t.Errorf("%q accepted as key %q", in, got)
		}
	}
	got, _, err := checkKey(rawKey{value: `"k0123456789abcdef"`, present: true, lines: 1}, rule, m.MatchWhole)
	if err != nil || got != "k0123456789abcdef" {
		t.Errorf(`"k0123456789abcdef": %q %v`, got, err)
	}
}

func TestIsFinal(t *testing.T) {
	def := &Operation{}
	for status, want := range map[int]bool{200: true, 201: true, 204: true, 400: true, 402: true, 404: true, 422: true,
		408: false, 409: false, 425: false, 429: false, 500: false, 503: false, 302: false, 100: false} {
		if def.isFinal(status) != want {
			t.Errorf("default rules, %d: want final=%v", status, want)
		}
	}
	custom := &Operation{Statuses: []StatusRule{{Class: 2}, {Code: 409}, {Code: 202, Exclude: true}}}
	for status, want := range map[int]bool{200: true, 202: false, 409: true, 404: false} {
		if custom.isFinal(status) != want {
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
	var got map[string][]string
	if err := json.Unmarshal(storableHeaders(op, nil, h), &got); err != nil {
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
	for d, want := range map[time.Duration]int{0: 1, 1: 1, 999_999_999: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("%v: %d, want %d", d, got, want)
		}
	}
}

func TestNewRequiresScope(t *testing.T) {
	st := memstore.New(nil)
	if _, err := New(Config{Store: st}); err == nil {
		t.Error("no Scope and no SingleTenant must fail")
	}
	if _, err := New(Config{Store: st, SingleTenant: true, Scope: bearerScope}); err == nil {
		t.Error("both Scope and SingleTenant must fail")
	}
	if _, err := New(Config{Scope: bearerScope}); err == nil {
		t.Error("no Store must fail")
	}
	for _, status := range []int{200, 302, 600, -1} {
		if _, err := New(Config{Store: st, Scope: bearerScope, ScopeStatus: status}); err == nil {
			t.Errorf("ScopeStatus %d must fail", status)
		}
	}
	if _, err := New(Config{Store: st, Scope: bearerScope, ScopeStatus: 403}); err != nil {
		t.Errorf("ScopeStatus 403: %v", err)
	}
	if _, err := New(Config{Store: st, SingleTenant: true}); err != nil {
		t.Errorf("SingleTenant: %v", err)
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
	doc := storableHeaders(op, nil, orig)
	var m map[string][]string
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	jsonbLike := strings.ReplaceAll(strings.ReplaceAll(string(doc), `":[`, `": [`), `","`, `", "`)
	for _, d := range []string{string(doc), jsonbLike} {
		h := http.Header{}
		setStoredHeaders(h, []byte(d), 0)
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
		setStoredHeaders(h, []byte(bad), 0)
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
	got := storableHeaders(op, nil, h)
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
	if none := storableHeaders(op, nil, http.Header{"Set-Cookie": {"x"}}); none != nil {
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

// ProviderKey and DeriveID depend on (scope, key, label) only, and the secret when set; an
// unguarded handle derives from its nonce, so two of them never share a key.
func TestLeaseDerivations(t *testing.T) {
	id := store.ID{Scope: "t1", Key: key1}
	a := &Lease{claim: store.Claim{ID: id}, token: 1}
	b := &Lease{claim: store.Claim{ID: store.ID{Scope: "t1", Key: key1}}, token: 7}
	if a.providerKey("charge") != b.providerKey("charge") || a.DeriveID("payment") != b.DeriveID("payment") {
		t.Fatal("derivations must not depend on the attempt")
	}
	if a.Token() != 1 || b.Token() != 7 {
		t.Errorf("tokens %d %d", a.Token(), b.Token())
	}
	pk := a.providerKey("charge")
	if len(pk) != 64 || strings.Trim(pk, "0123456789abcdef") != "" {
		t.Fatalf("provider key %q: want 64 lowercase hex digits", pk)
	}
	others := []*Lease{
		{claim: store.Claim{ID: store.ID{Scope: "t2", Key: key1}}},
		{claim: store.Claim{ID: store.ID{Scope: "t1", Key: key1 + "x"}}},
		{claim: store.Claim{ID: id}, secret: []byte("s")},
		// Framing: moving a byte from scope to key must change the result.
		{claim: store.Claim{ID: store.ID{Scope: "t", Key: "1" + key1}}},
	}
	for i, o := range others {
		if o.providerKey("charge") == pk {
			t.Errorf("variant %d collides", i)
		}
	}
	if pk == a.providerKey("refund") {
		t.Error("labels must separate keys")
	}
	// The first 6 bytes of a DeriveID are the derivation's own (version and variant bits come
	// later): equal to ProviderKey's only if both used one domain.
	if a.providerKey("payment")[:12] == strings.ReplaceAll(a.DeriveID("payment"), "-", "")[:12] {
		t.Error("ProviderKey and DeriveID must use different domains")
	}
	u := a.DeriveID("payment")
	if len(u) != 36 || u[14] != '8' || !strings.ContainsRune("89ab", rune(u[19])) {
		t.Errorf("DeriveID %q is not an RFC 9562 version 8 UUID", u)
	}
	n1 := &Lease{nonce: []byte("0123456789abcdef")}
	n2 := &Lease{nonce: []byte("fedcba9876543210")}
	if n1.providerKey("charge") == n2.providerKey("charge") || n1.Token() != 0 {
		t.Error("unguarded handles must derive from their nonce")
	}
	if err := n1.Extend(t.Context(), time.Second); err != nil {
		t.Errorf("Extend of an unguarded handle: %v", err)
	}
}

// JSON is the response a handler answers with a JSON body; a value encoding/json refuses is an
// error the handler returns (a 500 that releases the key), not a response.
func TestJSONResponse(t *testing.T) {
	resp, err := JSON(http.StatusCreated, map[string]any{"id": 7, "note": "<b>"})
	if err != nil || resp.Status != 201 || resp.Header.Get("Content-Type") != "application/json" ||
		string(resp.Body) != `{"id":7,"note":"\u003cb\u003e"}` {
		t.Errorf("JSON: %+v %s %v", resp, resp.Body, err)
	}
	if _, err := JSON(200, make(chan int)); err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("JSON of a channel: %v", err)
	}
}
