package mutants

import "net/http"

// conflictWithoutRetryAfter answers a key in flight with 409 but no Retry-After: a client has
// no way to know when to come back, and SDKs that honour only Retry-After give up.
func conflictWithoutRetryAfter(l *Layer) {
	l.InFlight = func(w http.ResponseWriter) { Problem(w, http.StatusConflict, "in-flight") }
}
