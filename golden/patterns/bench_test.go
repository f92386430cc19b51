package patterns

// BenchmarkDecodePatterns measures the generated decoder (strict decode, 13 pattern checks,
// canonical form, fingerprint) on the same pattern-heavy body with each engine, in one run:
// createTransfer's patterns run on RE2, createTransferEcma's (the same checks, each with a
// lookahead) on the ECMAScript engine. The ratio is in bench/README.md:
//
//	go test ./golden/patterns -run x -bench DecodePatterns -benchmem -count 5

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/runtime/gen"
)

func BenchmarkDecodePatterns(b *testing.B) {
	const js = "application/json"
	raw := []byte(transferBody)
	for _, engine := range []string{"re2", "ecmascript"} {
		b.Run(engine, func(b *testing.B) {
			op, target := operationCreateTransfer(), "/transfers"
			decode := func(in *gen.Input) error { _, err := decodeCreateTransfer(in); return err }
			if engine == "ecmascript" {
				op, target = operationCreateTransferEcma(), "/ecma/transfers"
				decode = func(in *gen.Input) error { _, err := decodeCreateTransferEcma(in); return err }
			}
			r := httptest.NewRequest("POST", target, nil)
			m := &gen.Matcher{} // one per Runtime: each pattern is compiled once
			var in gen.Input
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			// By hand, not runtime.Fingerprint: that reads the body and allocates an Input per call, which is not measured here.
			for b.Loop() {
				in.Reset(r, raw, js, js, nil, m)
				in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
				if err := decode(&in); err != nil {
					b.Fatal(err)
				}
				in.Sum()
			}
		})
	}
}
