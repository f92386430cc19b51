package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The service every replica runs: two marked operations written as a user writes them on the
// runtime (the decoders play generated code), over pgstore, with business tables that keep the
// attempt that wrote each row and a payment provider reached over HTTP.
//
//	POST /v1/payments  atomic mode: one payments row, in the claim's transaction
//	POST /v1/charges   lease mode: a provider charge under Lease.ProviderKey("charge") in the
//	                   call phase, then one charges row in the completion
//	GET  /_pool        the pool's acquired and total connections (the slow-body scenario)
//
// Request headers are the scenarios' knobs; they are not part of the fingerprint:
//
//	X-Attempt    the attempt's id, written into the row and sent to the provider
//	X-Hold       "call" (lease call phase, after the provider call) or "complete" (atomic
//	             handler after its write, lease completion after its write): the replica prints
//	             "IN_HANDLER <attempt>" there
//	X-Delay      the call phase (lease) or the handler after its write (atomic) sleeps this long,
//	             or until its context ends
//	X-Sleep-SQL  the transaction runs SELECT pg_sleep(...) for this long after the write (atomic
//	             handler, lease completion): a statement in progress
//	X-Body-Event the replica prints "BODY <attempt>" when the request reaches it, before the
//	             runtime reads the body

// Schema creates the business tables. No unique constraint guards them: a second execution
// must show up as a second row.
const Schema = `
CREATE TABLE IF NOT EXISTS payments (
	id bigserial PRIMARY KEY, tenant text NOT NULL, idem_key text NOT NULL,
	amount bigint NOT NULL, attempt text NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS charges (
	id bigserial PRIMARY KEY, tenant text NOT NULL, idem_key text NOT NULL,
	amount bigint NOT NULL, attempt text NOT NULL, provider_ref text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT clock_timestamp());`

// ServiceConfig configures the operations of a replica.
type ServiceConfig struct {
	// Retention and Lease of both operations (Lease only matters for /v1/charges).
	Retention, Lease time.Duration
	// Provider is the payment provider's base URL.
	Provider string
	// Events receives the replica's events ("IN_HANDLER a-1", "BODY a-1").
	Events func(string)
}

// AtomicOp and LeaseOp are the two marked operations.
func AtomicOp(c ServiceConfig) *runtime.Operation {
	return &runtime.Operation{ID: "createPayment", Method: "POST", Path: "/v1/payments", Mode: runtime.ModeAtomic,
		Key: runtime.KeyRule{Header: "Idempotency-Key", Required: true}, Retention: c.Retention,
		MediaTypes: []string{"application/json"}}
}

func LeaseOp(c ServiceConfig) *runtime.Operation {
	return &runtime.Operation{ID: "createCharge", Method: "POST", Path: "/v1/charges", Mode: runtime.ModeLease,
		Key: runtime.KeyRule{Header: "Idempotency-Key", Required: true}, Retention: c.Retention, Lease: c.Lease,
		MediaTypes: []string{"application/json"}}
}

// request is a decoded request: {"amount": N} and the knobs.
type request struct {
	tenant, key, attempt, hold string
	amount                     int64
	delay, sleepSQL            time.Duration
}

// decode plays a generated decoder: a strict {"amount": positive integer} body, framed as raw
// bytes.
func decode(in *gen.Input) (request, error) {
	var body struct {
		Amount *int64 `json:"amount"`
	}
	dec := json.NewDecoder(bytes.NewReader(in.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return request{}, &gen.BodyError{Reason: err.Error()}
	}
	if body.Amount == nil || *body.Amount <= 0 {
		return request{}, &gen.BodyError{At: "/amount", Reason: "amount must be a positive integer"}
	}
	in.RawBody()
	h := in.Request.Header
	tenant, _ := Tenant(in.Request)
	r := request{tenant: tenant, key: h.Get("Idempotency-Key"), attempt: h.Get("X-Attempt"), hold: h.Get("X-Hold"), amount: *body.Amount}
	r.delay, _ = time.ParseDuration(h.Get("X-Delay"))
	r.sleepSQL, _ = time.ParseDuration(h.Get("X-Sleep-SQL"))
	return r, nil
}

// Tenant is the scope function: the bearer token is the tenant.
func Tenant(r *http.Request) (string, error) {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || t == "" {
		return "", errors.New("no bearer token")
	}
	return t, nil
}

// answer is the body of a success: the execution's row and the attempt that wrote it.
type answer struct {
	ID        int64  `json:"id"`
	Key       string `json:"key"`
	Amount    int64  `json:"amount"`
	Attempt   string `json:"attempt"`
	Reference string `json:"provider_reference,omitempty"`
}

func created(a answer) runtime.Response {
	body, _ := json.Marshal(a)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/things/%d", a.ID))
	return runtime.Response{Status: http.StatusCreated, Header: h, Body: body}
}

// NewService returns the replica's handler over pool, served by rt.
func NewService(rt *runtime.Runtime, pool *pgxpool.Pool, c ServiceConfig) http.Handler {
	event := c.Events
	if event == nil {
		event = func(string) {}
	}
	provider := &ProviderClient{URL: c.Provider, HTTP: &http.Client{Timeout: 10 * time.Second}}
	hold := func(ctx context.Context, r *request, where string, d time.Duration) error {
		if r.hold == where {
			event("IN_HANDLER " + r.attempt)
		}
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	sleepSQL := func(ctx context.Context, db pgstore.DBTX, d time.Duration) error {
		if d <= 0 {
			return nil
		}
		_, err := db.Exec(ctx, "SELECT pg_sleep($1::float8)", d.Seconds())
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", runtime.AtomicHandler(rt, AtomicOp(c), runtime.BindAtomic(decode,
		func(ctx context.Context, db pgstore.DBTX, r *request) (runtime.Response, error) {
			a := answer{Key: r.key, Amount: r.amount, Attempt: r.attempt}
			if err := db.QueryRow(ctx, `INSERT INTO payments (tenant, idem_key, amount, attempt) VALUES ($1, $2, $3, $4) RETURNING id`,
				r.tenant, r.key, r.amount, r.attempt).Scan(&a.ID); err != nil {
				return runtime.Response{}, err
			}
			if err := hold(ctx, r, "complete", r.delay); err != nil {
				return runtime.Response{}, err
			}
			if err := sleepSQL(ctx, db, r.sleepSQL); err != nil {
				return runtime.Response{}, err
			}
			return created(a), nil
		})))
	mux.Handle("POST /v1/charges", runtime.LeaseHandler(rt, LeaseOp(c), runtime.BindLease(decode,
		func(ctx context.Context, l *runtime.Lease, r *request) (runtime.CompleteFunc[pgstore.DBTX], error) {
			pk, err := l.ProviderKey(ctx, "charge")
			if err != nil {
				return nil, err
			}
			ref, err := provider.Charge(ctx, ChargeRequest{Tenant: r.tenant, Key: r.key, ProviderKey: pk,
				Attempt: r.attempt, Amount: r.amount})
			if err != nil {
				return nil, err
			}
			if err := hold(ctx, r, "call", r.delay); err != nil {
				return nil, err
			}
			return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
				a := answer{Key: r.key, Amount: r.amount, Attempt: r.attempt, Reference: ref}
				if err := db.QueryRow(ctx, `INSERT INTO charges (tenant, idem_key, amount, attempt, provider_ref) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
					r.tenant, r.key, r.amount, r.attempt, ref).Scan(&a.ID); err != nil {
					return runtime.Response{}, err
				}
				if err := hold(ctx, r, "complete", 0); err != nil {
					return runtime.Response{}, err
				}
				if err := sleepSQL(ctx, db, r.sleepSQL); err != nil {
					return runtime.Response{}, err
				}
				return created(a), nil
			}, nil
		})))
	mux.HandleFunc("GET /_pool", func(w http.ResponseWriter, _ *http.Request) {
		s := pool.Stat()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int32{"acquired": s.AcquiredConns(), "total": s.TotalConns()})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Body-Event") != "" {
			event("BODY " + r.Header.Get("X-Attempt"))
		}
		mux.ServeHTTP(w, r)
	})
}
