package conform

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/conform/testdata/mutants"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
)

func loadSpec(t *testing.T, path string) *model.Document {
	t.Helper()
	res, err := spec.Load(context.Background(), spec.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if res.Diags.HasErrors() {
		t.Fatalf("%s: %v", path, res.Diags.Sorted())
	}
	return res.Doc
}

// mutantOptions are the options every mutant is checked with: two tenants, the knobs, the
// effects oracle and the fault proxy.
func mutantOptions(url string, k *mutants.Kit) Options {
	return Options{
		BaseURL:      url,
		Header:       http.Header{"Authorization": {"Bearer tenant-a"}},
		TenantHeader: http.Header{"Authorization": {"Bearer tenant-b"}},
		FailHeader:   http.Header{"X-Test-Fail": {"500"}},
		DelayHeader:  http.Header{"X-Test-Delay": {"150ms"}},
		Effects:      func(context.Context) (int64, error) { return k.Effects(), nil },
		Faults:       true,
		Short:        true,
		Seed:         1,
		Timeout:      2 * time.Minute,
	}
}

// TestMutants: conform fails every mutant and names the check its bug breaks, and passes the
// good layer.
func TestMutants(t *testing.T) {
	doc := loadSpec(t, "testdata/mutants/payments.yaml")
	for _, m := range mutants.All() {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			h, k := mutants.New(m)
			srv := httptest.NewServer(h)
			defer srv.Close()
			rep, err := Run(context.Background(), doc, mutantOptions(srv.URL, k))
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Status == Fail {
					failed = append(failed, string(r.Check))
				}
			}
			var text strings.Builder
			WriteText(&text, rep)
			if testing.Verbose() {
				t.Log(text.String())
			}
			if m.Caught == "" {
				if len(failed) > 0 {
					t.Fatalf("the good layer failed %v:\n%s", failed, text.String())
				}
				return
			}
			if !slices.Contains(failed, m.Caught) {
				t.Fatalf("%s (%s): %s did not fail (failed: %v):\n%s", m.Name, m.Bug, m.Caught, failed, text.String())
			}
			t.Logf("%s: failed %v", m.Name, failed)
		})
	}
}

// TestFaultsConcurrently: with no effects oracle the operations are checked Concurrency at a
// time, each running the same fault checks at once through the one fault proxy; the good layer
// still passes every check, each attempt taking back only its own answers (an attempt named
// after its check alone was once shared by two operations, which then saw each other's answers:
// an attempt executed twice, another operation's key echoed).
func TestFaultsConcurrently(t *testing.T) {
	doc := loadSpec(t, "testdata/mutants/payments.yaml")
	if len(doc.Operations) < 2 {
		t.Fatalf("the spec has %d operations: the test needs two checked at once", len(doc.Operations))
	}
	for round := range 3 {
		h, k := mutants.New(mutants.All()[0])
		srv := httptest.NewServer(h)
		o := mutantOptions(srv.URL, k)
		o.Effects, o.Concurrency, o.Seed = nil, 4, uint64(round+1)
		rep, err := Run(context.Background(), doc, o)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed() || rep.Incomplete() {
			var text strings.Builder
			WriteText(&text, rep)
			t.Fatalf("round %d: the good layer, operations checked at once:\n%s", round, text.String())
		}
	}
}
