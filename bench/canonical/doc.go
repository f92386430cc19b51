// Package canonicalbench measures the generic canonicalizer of runtime/canonical against
// generic baselines in the same run: gowebpki/jcs and encoding/json/jsontext (with
// GOEXPERIMENT=jsonv2). The typed path (the generated decoders, canonicalizers and
// fingerprints) is benchmarked beside the generated code it measures, in
// golden/conformance/bench_test.go, on the bodies in testdata/. RESULTS.md has the commands and
// the figures of both.
package canonicalbench
