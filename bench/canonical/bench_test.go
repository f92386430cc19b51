package canonicalbench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// impl is one way of canonicalizing the raw body, measured on raw.
type impl struct {
	name string
	run  func(b *testing.B, raw []byte)
}

// bodies are the benchmark bodies, shared with the typed-path benchmarks of
// golden/conformance/bench_test.go.
var bodies = []string{"payment.json", "order4k.json"}

func load(tb testing.TB, file string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func name(file string) string { return file[:len(file)-len(filepath.Ext(file))] }

// BenchmarkGeneric: the generic canonicalizer (schema-less bodies, oneOf/anyOf subtrees,
// undeclared members), raw bytes to canonical bytes, against gowebpki/jcs Transform (and
// jsontext.Value.Canonicalize with GOEXPERIMENT=jsonv2). No hashing, no generated code.
func BenchmarkGeneric(b *testing.B) {
	for _, file := range bodies {
		raw := load(b, file)
		b.Run("body="+name(file)+"/impl=idemgen", func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var err error
				if out, err = canonical.AppendCanonical(out[:0], raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("body="+name(file)+"/impl=jcs", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := jcs.Transform(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, x := range extraGenericImpls() {
			b.Run("body="+name(file)+"/impl="+x.name, func(b *testing.B) { x.run(b, raw) })
		}
	}
}

// The benchmarked canonicalizer computes what the baselines compute on these bodies.
func TestGenericMatchesJCS(t *testing.T) {
	for _, file := range bodies {
		raw := load(t, file)
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := canonical.AppendCanonical(nil, raw)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s:\n got %s (%v)\njcs %s", file, got, err, want)
		}
	}
}
