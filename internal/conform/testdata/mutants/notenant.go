package mutants

import "net/http"

// noTenant keys records by the idempotency key alone: another tenant who happens to send the
// same key gets this tenant's payment replayed (its id, amount and Location).
func noTenant(l *Layer) {
	l.Scope = func(_ *http.Request, key string) string { return key }
}
