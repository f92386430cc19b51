package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// knobs are what one request asks of the conformance handlers: its tenant and the test knobs
// of testdata/cases/README.md. They travel in the request context because the generated
// handler signature carries only the declared parameters and body; the runtime never reads
// them.
type knobs struct {
	tenant string
	// delay is X-Test-Delay: how long the handler sleeps before doing its work.
	delay time.Duration
	// fail is X-Test-Fail: "500", "503", "429" or "panic", applied after the work is done.
	fail string
}

type knobsKey struct{}

func knobsFrom(ctx context.Context) knobs {
	k, _ := ctx.Value(knobsKey{}).(knobs)
	return k
}

// errNoTenant is the scope failure: the request has no `Authorization: Bearer <tenant>`.
var errNoTenant = errors.New("no Authorization: Bearer <tenant> header")

// tenantOf returns the bearer token, which is the tenant (the idempotency scope).
func tenantOf(r *http.Request) (string, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoTenant
	}
	return token, nil
}

// withKnobs reads the tenant and the test knobs into the request context. A knob with a value
// the handlers do not understand is refused with 400 before anything runs, so a typo in a case
// cannot silently test nothing.
func withKnobs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var k knobs
		k.tenant, _ = tenantOf(r)
		if v := r.Header.Get("X-Test-Delay"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				writeProblem(w, http.StatusBadRequest, "test-knob-invalid", "X-Test-Delay", fmt.Sprintf("want a duration such as 400ms, got %q", v))
				return
			}
			k.delay = d
		}
		if v := r.Header.Get("X-Test-Fail"); v != "" {
			switch v {
			case "500", "503", "429", "panic":
				k.fail = v
			default:
				writeProblem(w, http.StatusBadRequest, "test-knob-invalid", "X-Test-Fail", fmt.Sprintf("want 500, 503, 429 or panic, got %q", v))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), knobsKey{}, k)))
	})
}

// sleep waits out X-Test-Delay, or until ctx ends.
func (k knobs) sleep(ctx context.Context) error {
	if k.delay <= 0 {
		return nil
	}
	t := time.NewTimer(k.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
