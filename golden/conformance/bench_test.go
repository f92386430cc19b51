package conformance

// Benchmarks of the generated typed path against generic baselines in the same run. The
// commands, the interleaved measuring loop and the figures are in
// bench/canonical/RESULTS.md; bench/run.sh runs them with the generic-canonicalizer benchmarks
// of bench/canonical.
//
// Bodies (bench/canonical/testdata): payment.json is the conformance PaymentRequest with every
// property set (156 bytes); order4k.json a createOrder body of 4103 bytes (72 lines, metadata,
// members out of canonical order, prices like 42.0). They are read from bench/canonical because
// this folder holds generated files and hand-written tests only (TestGolden compares every
// other file with the generator's output).

import (
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/idemgen/idemgen/runtime/gen"
)

func readBody(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "bench", "canonical", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// sink keeps results alive so that the compiler cannot drop the measured work.
var sink [32]byte

// impl is one way of computing a fingerprint from the raw body, measured on raw.
type impl struct {
	name string
	run  func(b *testing.B, raw []byte)
}

// benchBody is one benchmark body with the generated code of its operation.
type benchBody struct {
	name string
	file string
	// fingerprint returns a function that fingerprints the body decoded once (the handler
	// wrapper's second step), and decodeAndFingerprint one that does both steps per call.
	fingerprint          func(b *testing.B, raw []byte) func()
	decodeAndFingerprint func(b *testing.B, raw []byte) func()
	// unmarshal is the baseline's decoding: encoding/json into the same generated type.
	unmarshal func(raw []byte) error
}

// benchBodies spells out each operation's closures instead of sharing them through function
// values, so the generated functions are called directly, as in the generated code. The
// gen.Input is reused across iterations, as the generated handler reuses its inputs.
// They drive gen.Input by hand, not runtime.Fingerprint: that reads the body and allocates an Input per call, which is not measured here.
func benchBodies() []benchBody {
	payments := httptest.NewRequest("POST", "/v1/payments", nil)
	orders := httptest.NewRequest("POST", "/v1/orders", nil)
	const js = "application/json"
	return []benchBody{
		{
			name: "payment", file: "payment.json",
			fingerprint: func(b *testing.B, raw []byte) func() {
				v, err := decodePaymentBody(raw)
				if err != nil {
					b.Fatal(err)
				}
				op := operationCreatePayment()
				var in gen.Input
				return func() {
					in.Reset(payments, raw, js, js, nil, nil)
					in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
					in.JSONBody(appendCanonicalPaymentRequestForCreatePayment(in.BodyStart(), &v))
					sink = in.Sum().Sum
				}
			},
			decodeAndFingerprint: func(b *testing.B, raw []byte) func() {
				op := operationCreatePayment()
				var in gen.Input
				m := &gen.Matcher{}
				return func() {
					in.Reset(payments, raw, js, js, nil, m)
					in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
					if _, err := decodeCreatePayment(&in); err != nil {
						b.Fatal(err)
					}
					sink = in.Sum().Sum
				}
			},
			unmarshal: func(raw []byte) error {
				var v PaymentRequest
				return json.Unmarshal(raw, &v)
			},
		},
		{
			name: "order4k", file: "order4k.json",
			fingerprint: func(b *testing.B, raw []byte) func() {
				v, err := decodeOrderBody(raw)
				if err != nil {
					b.Fatal(err)
				}
				op := operationCreateOrder()
				var in gen.Input
				return func() {
					in.Reset(orders, raw, js, js, nil, nil)
					in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
					in.JSONBody(appendCanonicalCreateOrderBodyForCreateOrder(in.BodyStart(), &v))
					sink = in.Sum().Sum
				}
			},
			decodeAndFingerprint: func(b *testing.B, raw []byte) func() {
				op := operationCreateOrder()
				var in gen.Input
				m := &gen.Matcher{}
				return func() {
					in.Reset(orders, raw, js, js, nil, m)
					in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
					if _, err := decodeCreateOrder(&in); err != nil {
						b.Fatal(err)
					}
					sink = in.Sum().Sum
				}
			},
			unmarshal: func(raw []byte) error {
				var v CreateOrderBody
				return json.Unmarshal(raw, &v)
			},
		},
	}
}

// loop measures f, reporting allocations and the body size (MB/s).
func loop(b *testing.B, raw []byte, f func()) {
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		f()
	}
}

func jcsSum(b *testing.B, raw []byte) [32]byte {
	out, err := jcs.Transform(raw)
	if err != nil {
		b.Fatal(err)
	}
	return sha256.Sum256(out)
}

// BenchmarkFingerprint: the fingerprint alone. impl=idemgen is the framing of
// gen.Input.Begin + the generated canonical form of the decoded value + SHA-256, what the
// generated decode function adds to the decoding; impl=jcs is gowebpki/jcs Transform of the raw bytes
// + SHA-256; impl=jsontext (GOEXPERIMENT=jsonv2 only) is jsontext.Value.Canonicalize on a
// reused buffer + SHA-256.
func BenchmarkFingerprint(b *testing.B) {
	for _, body := range benchBodies() {
		raw := readBody(b, body.file)
		b.Run("body="+body.name+"/impl=idemgen", func(b *testing.B) { loop(b, raw, body.fingerprint(b, raw)) })
		b.Run("body="+body.name+"/impl=jcs", func(b *testing.B) {
			loop(b, raw, func() { sink = jcsSum(b, raw) })
		})
		for _, x := range extraFingerprintImpls() {
			b.Run("body="+body.name+"/impl="+x.name, func(b *testing.B) { x.run(b, raw) })
		}
	}
}

// BenchmarkRequest: the whole path a request body takes, raw bytes to (typed
// value for the handler, fingerprint). impl=idemgen is the generated decode function (strict
// decoder with its schema checks, canonical form) framed by gen.Input + SHA-256; impl=stdlib is encoding/json Unmarshal into the same
// generated type + gowebpki/jcs of the raw bytes + SHA-256.
func BenchmarkRequest(b *testing.B) {
	for _, body := range benchBodies() {
		raw := readBody(b, body.file)
		b.Run("body="+body.name+"/impl=idemgen", func(b *testing.B) { loop(b, raw, body.decodeAndFingerprint(b, raw)) })
		b.Run("body="+body.name+"/impl=stdlib", func(b *testing.B) {
			loop(b, raw, func() {
				if err := body.unmarshal(raw); err != nil {
					b.Fatal(err)
				}
				sink = jcsSum(b, raw)
			})
		})
	}
}

// BenchmarkMiddlewareDecode: what runtime.Middleware does with a body before the wrapped
// handler runs, with the handler's own encoding/json decoding after it, against the same
// without the re-encoding (which docs/design.md section 8 requires: the wrapped handler reads exactly
// what was fingerprinted), in
// one run. mode=as-sent decodes and fingerprints and hands the body on as sent;
// mode=reencoded also keeps the re-encoding the handler then reads (gen.Input.Reencode).
func BenchmarkMiddlewareDecode(b *testing.B) {
	// By hand, not runtime.Fingerprint: that reads the body and allocates an Input per call, which is not measured here.
	payments := httptest.NewRequest("POST", "/v1/payments", nil)
	orders := httptest.NewRequest("POST", "/v1/orders", nil)
	const js = "application/json"
	for _, body := range []struct {
		name, file string
		run        func(in *gen.Input, raw []byte, reencode bool) []byte
	}{
		{"payment", "payment.json", func(in *gen.Input, raw []byte, reencode bool) []byte {
			op := operationCreatePayment()
			in.Reset(payments, raw, js, js, nil, nil)
			in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
			if reencode {
				in.Reencode()
			}
			if _, err := decodeCreatePayment(in); err != nil {
				panic(err)
			}
			sink = in.Sum().Sum
			out, _ := in.ReencodedBody()
			var v PaymentRequest
			if err := json.Unmarshal(out, &v); err != nil {
				panic(err)
			}
			return out
		}},
		{"order4k", "order4k.json", func(in *gen.Input, raw []byte, reencode bool) []byte {
			op := operationCreateOrder()
			in.Reset(orders, raw, js, js, nil, nil)
			in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
			if reencode {
				in.Reencode()
			}
			if _, err := decodeCreateOrder(in); err != nil {
				panic(err)
			}
			sink = in.Sum().Sum
			out, _ := in.ReencodedBody()
			var v CreateOrderBody
			if err := json.Unmarshal(out, &v); err != nil {
				panic(err)
			}
			return out
		}},
	} {
		raw := readBody(b, body.file)
		for _, mode := range []string{"as-sent", "reencoded"} {
			b.Run("body="+body.name+"/mode="+mode, func(b *testing.B) {
				var in gen.Input
				loop(b, raw, func() { body.run(&in, raw, mode == "reencoded") })
			})
		}
	}
}
