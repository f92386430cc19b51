package conformance

import (
	"context"
	"net/http"
	"strconv"

	api "github.com/idemgen/idemgen/golden/conformance"
)

// The functions below serve the example services of examples/ (oapi-codegen, ogen, chi): they
// implement the same API on other frameworks and run the same cases, so they share this
// service's tenant, test knobs, effects endpoint, fake provider and tables (Migrate), and the
// chi example mounts this service's own handlers.

// ProblemBase prefixes the type URI of the service's own problems ("payment-not-found",
// "test-failure", …); the runtime's problems have their own.
const ProblemBase = problemBase

// DeclineAbove is the largest amount (minor units) createPayment accepts; above it the payment
// is declined with a final 402.
const DeclineAbove = declineAbove

// TenantOf returns the tenant of r, the bearer token of `Authorization: Bearer <tenant>`: the
// idempotency scope function of every service that runs the cases.
func TenantOf(r *http.Request) (string, error) { return tenantOf(r) }

// WithKnobs reads the tenant and the test knobs (X-Test-Delay, X-Test-Fail) into the request
// context for Tenant, BeforeWork and AfterWork. A knob value the handlers do not understand is
// refused with 400 test-knob-invalid before anything runs.
func WithKnobs(next http.Handler) http.Handler { return withKnobs(next) }

// Tenant returns the tenant WithKnobs read for this request; "" without one.
func Tenant(ctx context.Context) string { return knobsFrom(ctx).tenant }

// BeforeWork waits out X-Test-Delay, or until ctx ends (its error then): the first thing a
// handler does.
func BeforeWork(ctx context.Context) error { return knobsFrom(ctx).sleep(ctx) }

// AfterWork applies X-Test-Fail once the handler has done its work: it panics for "panic", and
// otherwise returns the status the handler must answer instead of its own (500, 503 or 429),
// or 0 when there is no failure to inject. A 503 or 429 answer carries Retry-After: 1.
func AfterWork(ctx context.Context) int {
	switch f := knobsFrom(ctx).fail; f {
	case "":
		return 0
	case "panic":
		panic("conformance: X-Test-Fail: panic")
	default:
		code, _ := strconv.Atoi(f)
		return code
	}
}

// WriteFailure writes the problem of an injected failure (AfterWork's status).
func WriteFailure(w http.ResponseWriter, status int) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	WriteProblem(w, status, "test-failure", "Injected failure", "X-Test-Fail: "+strconv.Itoa(status)+" after the handler did its work")
}

// WriteProblem writes an RFC 9457 problem of the service's own, type ProblemBase + name.
func WriteProblem(w http.ResponseWriter, status int, name, title, detail string) {
	writeProblem(w, status, name, title, detail)
}

// Effects serves GET /_effects: the tenant's row count in every business table and the
// provider's real charges.
func Effects(tables Tables, provider *Provider) http.HandlerFunc {
	return (&service{tables: tables, provider: provider}).effects
}

// GetPayment serves GET /v1/payments/{payment_id}, the unmarked operation.
func GetPayment(tables Tables, provider *Provider) http.HandlerFunc {
	return (&service{tables: tables, provider: provider}).getPayment
}

// Handlers returns the service's business functions as the generated api.Handlers, for
// api.Register on another router. The handlers write through the transaction the runtime
// gives them and read the tenant and the knobs that WithKnobs put in the context.
func Handlers(provider *Provider) api.Handlers {
	return (&service{provider: provider}).handlers()
}
