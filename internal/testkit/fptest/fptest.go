// Package fptest pins the fingerprints of generated code byte for byte: a corpus is a list of
// requests, each with the fingerprint the generated decode path must compute for it (values
// recorded from an earlier generator, so a change of framing or canonical form fails the test).
package fptest

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Request is one request of a corpus.
type Request struct {
	Op     string // operationId
	Method string // default POST
	Target string // path and query as sent
	// Path holds the path parameter values by their names in the spec, as routing sets them.
	Path map[string]string
	// Header holds name, value pairs, added in order (a name may repeat).
	Header []string
	// MediaType is the request's media type ("" without a body); the operation's entry that
	// admits it is found as the runtime finds it.
	MediaType string
	Body      string
}

// HTTP builds the request with its path values and headers set.
func (c Request) HTTP() *http.Request {
	m := c.Method
	if m == "" {
		m = http.MethodPost
	}
	r := httptest.NewRequest(m, c.Target, strings.NewReader(c.Body))
	for name, v := range c.Path {
		r.SetPathValue(name, v)
	}
	for i := 0; i+1 < len(c.Header); i += 2 {
		r.Header.Add(c.Header[i], c.Header[i+1])
	}
	if c.MediaType != "" && r.Header.Get("Content-Type") == "" { // Header may give it with parameters (a boundary)
		r.Header.Set("Content-Type", c.MediaType)
	}
	return r
}

// Check computes each request's fingerprint with fp and compares it with the parallel entry of
// want: the fingerprint (Fingerprint.String), or, for a request that must be refused, "refused at
// <pointer>: <error text>". Run with IDEMGEN_FPTEST_PRINT=1 to print the computed want slice, for
// recording a new corpus; recorded values are reviewed like any golden file.
func Check(t *testing.T, corpus []Request, want []string, fp func(c Request, r *http.Request) (canonical.Fingerprint, error)) {
	t.Helper()
	if os.Getenv("IDEMGEN_FPTEST_PRINT") != "" {
		fmt.Println("var want = []string{")
		for i, c := range corpus {
			fmt.Printf("\t%q, // %d %s\n", outcome(fp(c, c.HTTP())), i, c.Op)
		}
		fmt.Println("}")
		return
	}
	if len(want) != len(corpus) {
		t.Fatalf("%d requests, %d expected outcomes", len(corpus), len(want))
	}
	for i, c := range corpus {
		if got := outcome(fp(c, c.HTTP())); got != want[i] {
			t.Errorf("request %d (%s %s):\n got %s\nwant %s", i, c.Op, c.Target, got, want[i])
		}
	}
}

// outcome is a fingerprint, or the refusal with its pointer and text.
func outcome(fp canonical.Fingerprint, err error) string {
	if err == nil {
		return fp.String()
	}
	at := "?"
	var ce *canonical.Error
	var pe interface{ Pointer() string }
	switch {
	case errors.As(err, &ce):
		at = ce.Pointer
	case errors.As(err, &pe):
		at = pe.Pointer()
	}
	return fmt.Sprintf("refused at %q: %s", at, err)
}
