package canonicalbench

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// impl is one way of computing a fingerprint from what the request path has at hand.
type impl struct {
	name string
	// prepare runs once outside the timer: it decodes the body when the implementation starts
	// from the decoded value.
	run func(b *testing.B, raw []byte)
}

type body struct {
	name string
	file string
	// typed fingerprints the decoded value (the generated path).
	typed func(b *testing.B, raw []byte)
	// whole decodes raw bytes into the typed value and fingerprints it.
	whole func(b *testing.B, raw []byte)
	// stdlib is the whole-path baseline: encoding/json into the same type, jcs, sha256.
	stdlib func(b *testing.B, raw []byte)
}

var sink [32]byte

func bodies() []body {
	return []body{
		{
			name: "payment", file: "testdata/payment.json",
			typed: func(b *testing.B, raw []byte) {
				v, err := decodeCreatePaymentJSON(raw)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					sink = fingerprintCreatePayment("application/json", &v).Sum
				}
			},
			whole: func(b *testing.B, raw []byte) {
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					v, err := decodeCreatePaymentJSON(raw)
					if err != nil {
						b.Fatal(err)
					}
					sink = fingerprintCreatePayment("application/json", &v).Sum
				}
			},
			stdlib: func(b *testing.B, raw []byte) {
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					var v PaymentRequest
					if err := json.Unmarshal(raw, &v); err != nil {
						b.Fatal(err)
					}
					sink = jcsSum(b, raw)
				}
			},
		},
		{
			name: "order4k", file: "testdata/order4k.json",
			typed: func(b *testing.B, raw []byte) {
				v, err := decodeCreateOrderJSON(raw)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					sink = fingerprintCreateOrder("application/json", &v).Sum
				}
			},
			whole: func(b *testing.B, raw []byte) {
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					v, err := decodeCreateOrderJSON(raw)
					if err != nil {
						b.Fatal(err)
					}
					sink = fingerprintCreateOrder("application/json", &v).Sum
				}
			},
			stdlib: func(b *testing.B, raw []byte) {
				b.ReportAllocs()
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					var v CreateOrderBody
					if err := json.Unmarshal(raw, &v); err != nil {
						b.Fatal(err)
					}
					sink = jcsSum(b, raw)
				}
			},
		},
	}
}

func jcsSum(b *testing.B, raw []byte) [32]byte {
	out, err := jcs.Transform(raw)
	if err != nil {
		b.Fatal(err)
	}
	return sha256.Sum256(out)
}

func load(b *testing.B, file string) []byte {
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkFingerprint (issue 3, item 9a): the fingerprint alone. impl=idemgen starts from the
// decoded value (framing + typed canonical form + SHA-256); the baselines canonicalize the raw
// bytes and hash them.
func BenchmarkFingerprint(b *testing.B) {
	for _, body := range bodies() {
		raw := load(b, body.file)
		b.Run("body="+body.name+"/impl=idemgen", func(b *testing.B) { body.typed(b, raw) })
		b.Run("body="+body.name+"/impl=jcs", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				sink = jcsSum(b, raw)
			}
		})
		for _, x := range extraFingerprintImpls() {
			b.Run("body="+body.name+"/impl="+x.name, func(b *testing.B) { x.run(b, raw) })
		}
	}
}

// BenchmarkRequest (issue 3, item 9b): the whole path, raw bytes to (typed value,
// fingerprint), against encoding/json Unmarshal into the same type + jcs + SHA-256.
func BenchmarkRequest(b *testing.B) {
	for _, body := range bodies() {
		raw := load(b, body.file)
		b.Run("body="+body.name+"/impl=idemgen", func(b *testing.B) { body.whole(b, raw) })
		b.Run("body="+body.name+"/impl=stdlib", func(b *testing.B) { body.stdlib(b, raw) })
	}
}

// The benchmarked code computes what the baselines compute: the typed canonical body equals
// the jcs output of the raw body (with the excluded members left out of both).
func TestSameCanonicalForm(t *testing.T) {
	for _, c := range []struct {
		file, exclude string
		typed         func([]byte) ([]byte, error)
	}{
		{"testdata/payment.json", "/client_timestamp", func(raw []byte) ([]byte, error) {
			v, err := decodeCreatePaymentJSON(raw)
			return appendCanonicalPaymentRequest(nil, &v), err
		}},
		{"testdata/order4k.json", "/metadata/trace_id", func(raw []byte) ([]byte, error) {
			v, err := decodeCreateOrderJSON(raw)
			return appendCanonicalCreateOrderBody(nil, &v), err
		}},
	} {
		raw, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.typed(raw)
		if err != nil {
			t.Fatal(err)
		}
		ex, _ := canonical.NewExclusion(c.exclude)
		want, err := canonical.AppendCanonicalExcluding(nil, raw, ex)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n typed   %s\n generic %s", c.file, got, want)
		}
		full, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := canonical.AppendCanonical(nil, raw)
		if string(all) != string(full) {
			t.Errorf("%s: generic differs from jcs", c.file)
		}
	}
}

// BenchmarkGeneric: the generic canonicalizer (schema-less bodies, oneOf/anyOf subtrees), raw
// bytes to canonical bytes, against jcs.Transform (and jsontext with GOEXPERIMENT=jsonv2).
func BenchmarkGeneric(b *testing.B) {
	for _, body := range bodies() {
		raw := load(b, body.file)
		b.Run("body="+body.name+"/impl=idemgen", func(b *testing.B) {
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
		b.Run("body="+body.name+"/impl=jcs", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := jcs.Transform(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, x := range extraGenericImpls() {
			b.Run("body="+body.name+"/impl="+x.name, func(b *testing.B) { x.run(b, raw) })
		}
	}
}
