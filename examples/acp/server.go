package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/acp/checkout"
	"github.com/idemgen/idemgen/examples/acp/delegate"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// schemaSQL is the merchant's own tables; the idempotency store's table comes from
// pgstore.Migrate. A session is kept as the JSON document the API answers with, next to the
// columns the handlers look things up by.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS checkout_sessions (
	id         text PRIMARY KEY,
	tenant     text NOT NULL,
	status     text NOT NULL,
	doc        jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);
-- One row per update that ran: the request as the handler applied it.
CREATE TABLE IF NOT EXISTS session_updates (
	id         bigserial PRIMARY KEY,
	tenant     text NOT NULL,
	session_id text NOT NULL REFERENCES checkout_sessions (id),
	patch      jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS orders (
	id         text PRIMARY KEY,
	tenant     text NOT NULL,
	session_id text NOT NULL UNIQUE REFERENCES checkout_sessions (id),
	total      bigint NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS cancellations (
	id         bigserial PRIMARY KEY,
	tenant     text NOT NULL,
	session_id text NOT NULL UNIQUE REFERENCES checkout_sessions (id),
	reason     text,
	created_at timestamptz NOT NULL DEFAULT now()
);
-- Delegated payment tokens: the vault token, the allowance it may be used for, and the
-- idempotency key the agent sent (ACP's delegate-payment response echoes it in metadata).
CREATE TABLE IF NOT EXISTS delegated_payments (
	id              text PRIMARY KEY,
	tenant          text NOT NULL,
	idempotency_key text NOT NULL,
	max_amount      bigint NOT NULL,
	currency        text NOT NULL,
	session_ref     text NOT NULL,
	last4           text,
	created_at      timestamptz NOT NULL DEFAULT now()
);
`

// migrate creates the idempotency store's table and the merchant's (both idempotent).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate idempotency store: %w", err)
	}
	if _, err := pool.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("migrate merchant tables: %w", err)
	}
	return nil
}

// options are the merchant's knobs.
type options struct {
	// testKnobs honours X-Test-Delay and X-Test-Fail (see withCaller).
	testKnobs bool
}

// merchant is the business side: the handlers of the generated operations and the retrieve
// endpoint, over one pool.
type merchant struct {
	pool *pgxpool.Pool
	opts options
}

// newServer wires the generated packages to the merchant's handlers: one idempotency runtime
// over PostgreSQL whose scope is the caller's bearer token, the checkout and delegate-payment
// operations registered on one mux, and GET /checkout_sessions/{id}, which is safe and needs
// no key.
func newServer(pool *pgxpool.Pool, opts options) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{
		Store: pgstore.New(pool, pgstore.Options{}),
		Scope: callerOf,
	})
	if err != nil {
		return nil, err
	}
	m := &merchant{pool: pool, opts: opts}
	mux := http.NewServeMux()
	if err := checkout.Register(mux, rt, checkout.Handlers{
		CreateCheckoutSession:   m.createSession,
		UpdateCheckoutSession:   m.updateSession,
		CompleteCheckoutSession: m.completeSession,
		CancelCheckoutSession:   m.cancelSession,
	}); err != nil {
		return nil, err
	}
	if err := delegate.Register(mux, rt, delegate.Handlers{DelegatePayment: m.delegatePayment}); err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /checkout_sessions/{checkout_session_id}", m.getSession)
	return withCaller(mux, opts), nil
}

// errNoCaller is the scope failure: the request names no caller.
var errNoCaller = errors.New("no Authorization: Bearer <token> header")

// callerOf returns the caller's bearer token (agentic-checkout RFC section 3.1: Authorization:
// Bearer is required). The token identifies the agent, so it is the scope its keys live in.
func callerOf(r *http.Request) (string, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoCaller
	}
	return token, nil
}

// caller is what the handlers need to know about the request besides its decoded parameters
// and body: who sent it, and the test knobs it carries. The generated handler signature holds
// only what the spec declares, so it travels in the context.
type caller struct {
	tenant string
	// delay is X-Test-Delay: how long the handler waits after its writes.
	delay time.Duration
	// fail is X-Test-Fail ("500" or "503"): the handler answers that status after its writes.
	fail string
}

type callerKey struct{}

func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// withCaller puts the caller, and with opts.testKnobs the test knobs, into the request's
// context. A knob value the handlers do not understand is refused with 400 before anything
// runs, so a typo cannot silently test nothing.
func withCaller(next http.Handler, opts options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c caller
		c.tenant, _ = callerOf(r)
		if opts.testKnobs {
			if v := r.Header.Get("X-Test-Delay"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					writeError(w, http.StatusBadRequest, "invalid", "X-Test-Delay: want a duration such as 400ms")
					return
				}
				c.delay = d
			}
			if v := r.Header.Get("X-Test-Fail"); v != "" {
				if v != "500" && v != "503" {
					writeError(w, http.StatusBadRequest, "invalid", "X-Test-Fail: want 500 or 503")
					return
				}
				c.fail = v
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// answer is v as the handler's JSON answer with status, after the test knobs, which apply
// after its writes: the delay keeps the request in flight; a failure answers 500 or 503, which
// rolls the writes back with the transaction and leaves the key free (ACP agentic-checkout RFC
// section 6.5).
func (c caller) answer(ctx context.Context, status int, v any) (runtime.Response, error) {
	if c.delay > 0 {
		t := time.NewTimer(c.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return runtime.Response{}, ctx.Err()
		}
	}
	switch c.fail {
	case "500":
		return acpError(http.StatusInternalServerError, "processing_error", "processing_error", "the test asked for a failure (X-Test-Fail)", "")
	case "503":
		return acpError(http.StatusServiceUnavailable, "service_unavailable", "service_unavailable", "the test asked for a failure (X-Test-Fail)", "")
	}
	return runtime.JSON(status, v)
}
