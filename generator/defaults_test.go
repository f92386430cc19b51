package generator

import (
	"testing"

	"github.com/idemgen/idemgen/runtime"
)

// Generated settings leave out fields at the runtime's defaults, so the generator's copies of
// those defaults must be the runtime's.
func TestRuntimeDefaults(t *testing.T) {
	if runtimeDefaultKeyMin != runtime.DefaultKeyMinLength || runtimeDefaultKeyMax != runtime.DefaultKeyMaxLength ||
		runtimeDefaultRetention != runtime.DefaultRetention || runtimeDefaultLease != runtime.DefaultLease ||
		runtimeDefaultLimit != runtime.DefaultBodyLimit {
		t.Fatal("the generator's copies of the runtime's defaults differ from runtime's")
	}
}
