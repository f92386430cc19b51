//go:build !goexperiment.jsonv2

package canonicalbench

// Without GOEXPERIMENT=jsonv2 there is no encoding/json/jsontext baseline.
func extraGenericImpls() []impl { return nil }
