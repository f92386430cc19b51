//go:build !goexperiment.jsonv2

package conformance

// Without GOEXPERIMENT=jsonv2 there is no encoding/json/jsontext baseline.
func extraFingerprintImpls() []impl { return nil }
