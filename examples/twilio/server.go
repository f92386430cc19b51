package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/twilio/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// schema holds the payment sessions the operation starts, one row per session: the effect a
// retry must not repeat.
const schema = `CREATE TABLE IF NOT EXISTS payments (
	sid text PRIMARY KEY, account_sid text NOT NULL, call_sid text NOT NULL,
	charge_amount double precision, currency text, status_callback text NOT NULL,
	created timestamptz NOT NULL DEFAULT now())`

// Migrate creates the idempotency table and the payments table (both idempotent).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, schema)
	return err
}

// Options adjust the server for tests.
type Options struct {
	// Delay makes every handler that slow after its write.
	Delay time.Duration
	// Limits are the store's per-scope limits (a cap on new keys answers 429).
	Limits pgstore.Limits
}

// NewHandler serves the marked operation. The scope is the account: Twilio's clients
// authenticate with HTTP Basic, the account SID as the user name (this example takes the
// name without checking the token).
func NewHandler(pool *pgxpool.Pool, opts Options) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{Limits: opts.Limits}), Scope: account})
	if err != nil {
		return nil, err
	}
	s := &server{opts: opts}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, api.Handlers{CreatePayments: s.createPayments}); err != nil {
		return nil, err
	}
	return mux, nil
}

type server struct{ opts Options }

func account(r *http.Request) (string, error) {
	user, _, ok := r.BasicAuth()
	if !ok || user == "" {
		return "", errors.New("no account SID in the Authorization header")
	}
	return user, nil
}

// createPayments starts a payment session and answers Twilio's api.v2010.account.call.payments.
func (s *server) createPayments(ctx context.Context, tx pgstore.DBTX, p api.CreatePaymentsParams, in api.CreatePaymentsBody) (runtime.Response, error) {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	sid := "PK" + hex.EncodeToString(b)
	var created time.Time
	err := tx.QueryRow(ctx, `INSERT INTO payments (sid, account_sid, call_sid, charge_amount, currency, status_callback)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created`,
		sid, p.AccountSid, p.CallSid, in.ChargeAmount, in.Currency, in.StatusCallback).Scan(&created)
	if err != nil {
		return runtime.Response{}, fmt.Errorf("insert payment: %w", err)
	}
	if s.opts.Delay > 0 {
		select {
		case <-time.After(s.opts.Delay):
		case <-ctx.Done():
			return runtime.Response{}, ctx.Err()
		}
	}
	date := created.UTC().Format(time.RFC1123Z) // RFC 2822, as Twilio writes its dates
	return runtime.JSON(http.StatusCreated, map[string]string{
		"account_sid": p.AccountSid, "call_sid": p.CallSid, "sid": sid,
		"date_created": date, "date_updated": date,
		"uri": "/2010-04-01/Accounts/" + p.AccountSid + "/Calls/" + p.CallSid + "/Payments/" + sid + ".json",
	})
}

// pgstoreLimits caps the records one account completes per hour.
func pgstoreLimits(records int64) pgstore.Limits {
	return pgstore.Limits{Records: records, RecordsInterval: time.Hour}
}
