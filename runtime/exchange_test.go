package runtime

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// beginRuntime is a Runtime for Begin alone: Begin never touches the store, so the pool points
// nowhere and is never dialled.
func beginRuntime(t *testing.T) *Runtime {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rt, err := New(Config{Pool: pool, SingleTenant: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// begin runs Begin for one request and returns the exchange (nil when refused) and the response.
func begin(t *testing.T, rt *Runtime, op *Operation, body string, header ...string) (*Exchange, *httptest.ResponseRecorder) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	x, ok := rt.Begin(w, r, op)
	if ok != (x != nil) {
		t.Fatalf("Begin: ok %v with exchange %v", ok, x)
	}
	return x, w
}

// RFC 9110 section 12.5.1: a declared media range admits every type in it (newcomer report: a
// Swagger 2.0 body parameter without `consumes` is "*/*", and every request was 415).
func TestBeginMediaRanges(t *testing.T) {
	rt := beginRuntime(t)
	cases := []struct {
		declared     []string
		ct           string
		ok           bool
		mediaType    string // Exchange.MediaType: the request's own type
		declaredType string // Exchange.DeclaredMediaType: the entry that admitted it
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
		// A request names one media type: a range as Content-Type is not one.
		{[]string{"*/*"}, "*/*", false, "", ""},
		{[]string{"application/*"}, "application/*", false, "", ""},
		{[]string{"*/*"}, "not a media type", false, "", ""},
	}
	for _, c := range cases {
		op := &Operation{ID: "op", MediaTypes: c.declared}
		x, w := begin(t, rt, op, "{}", "Content-Type", c.ct)
		if (x != nil) != c.ok {
			t.Errorf("%v, %q: admitted %v, want %v (%d %s)", c.declared, c.ct, x != nil, c.ok, w.Code, w.Body)
			continue
		}
		if x == nil {
			if w.Code != http.StatusUnsupportedMediaType || problemType(t, w) != ProblemMediaTypeUnsupported {
				t.Errorf("%v, %q: %d %s, want 415 media-type-unsupported", c.declared, c.ct, w.Code, w.Body)
			}
			continue
		}
		if x.MediaType() != c.mediaType || x.DeclaredMediaType() != c.declaredType {
			t.Errorf("%v, %q: MediaType %q DeclaredMediaType %q, want %q %q",
				c.declared, c.ct, x.MediaType(), x.DeclaredMediaType(), c.mediaType, c.declaredType)
		}
	}
}

// RFC 8259 section 8.1: JSON is UTF-8, so a JSON body declaring another charset is 415, not
// decoded as if it were UTF-8.
func TestBeginJSONCharset(t *testing.T) {
	rt := beginRuntime(t)
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
		x, w := begin(t, rt, op, "{}", "Content-Type", ct)
		if (x != nil) != want {
			t.Errorf("%q: admitted %v, want %v (%d %s)", ct, x != nil, want, w.Code, w.Body)
			continue
		}
		if x == nil && (w.Code != http.StatusUnsupportedMediaType || problemType(t, w) != ProblemMediaTypeUnsupported ||
			!strings.Contains(w.Body.String(), "UTF-8")) {
			t.Errorf("%q: %d %s, want 415 media-type-unsupported naming UTF-8", ct, w.Code, w.Body)
		}
	}
}

// RFC 9110 section 15.5.16: a content coding the server does not apply is 415 (it was 400
// body-invalid, as the decoder met compressed bytes).
func TestBeginContentEncoding(t *testing.T) {
	rt := beginRuntime(t)
	op := &Operation{ID: "op", MediaTypes: []string{"application/json"}}
	for _, enc := range [][]string{{"gzip"}, {"br"}, {"identity, gzip"}, {"identity", "deflate"}} {
		h := []string{"Content-Type", "application/json"}
		for _, e := range enc {
			h = append(h, "Content-Encoding", e)
		}
		x, w := begin(t, rt, op, "\x1f\x8b\x08\x00", h...)
		if x != nil || w.Code != http.StatusUnsupportedMediaType || problemType(t, w) != ProblemMediaTypeUnsupported {
			t.Errorf("%q: %d %s, want 415 media-type-unsupported", enc, w.Code, w.Body)
			continue
		}
		if !strings.Contains(w.Body.String(), "Content-Encoding") || w.Header().Get("Accept-Encoding") != "identity" {
			t.Errorf("%q: detail %s, Accept-Encoding %q", enc, w.Body, w.Header().Get("Accept-Encoding"))
		}
	}
	for _, enc := range []string{"identity", "IDENTITY", ""} {
		if x, w := begin(t, rt, op, "{}", "Content-Type", "application/json", "Content-Encoding", enc); x == nil {
			t.Errorf("Content-Encoding %q: %d %s", enc, w.Code, w.Body)
		}
	}
}
