// Package baseline holds the handlers the benchmark harness compares idemgen against, all
// serving the conformance createPayment request (POST, JSON PaymentRequest, Bearer tenant):
//
//   - Bare: decode and answer, no database: the ceiling of the HTTP stack.
//   - Plain: the same business insert in a plain transaction, no idempotency: what a service
//     without protection pays.
//   - Handwritten: the recipe a team writes by hand from the usual blog post: claim with
//     INSERT ... ON CONFLICT DO NOTHING (autocommit), SELECT the record on conflict, business
//     insert, completion UPDATE, each its own round trip; fingerprint = SHA-256 of the trimmed
//     raw body. It is correct only in the easy cases (a crash between claim and completion
//     leaves the key stuck "started"), which is part of the point.
package baseline

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema creates the hand-written recipe's key table. The payments table is the conformance
// service's own.
const Schema = `
CREATE TABLE IF NOT EXISTS handwritten_keys (
	tenant        text NOT NULL,
	key           text NOT NULL,
	fingerprint   bytea NOT NULL,
	status        text NOT NULL,
	response_code integer,
	response_body bytea,
	created_at    timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (tenant, key)
)`

type paymentRequest struct {
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	To          string  `json:"to"`
	Description *string `json:"description,omitempty"`
}

type payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
	Status   string `json:"status"`
}

func tenant(r *http.Request) (string, bool) {
	t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return t, ok && t != ""
}

func readPayment(w http.ResponseWriter, r *http.Request) ([]byte, paymentRequest, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return nil, paymentRequest{}, false
	}
	var req paymentRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return nil, paymentRequest{}, false
	}
	return raw, req, true
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "pay_" + hex.EncodeToString(b[:])
}

func created(p payment) []byte {
	b, _ := json.Marshal(p)
	return b
}

func write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

const insertPayment = `INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`

// Bare decodes the request and answers 201 without touching a database.
func Bare() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := tenant(r); !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		_, req, ok := readPayment(w, r)
		if !ok {
			return
		}
		write(w, http.StatusCreated, created(payment{ID: newID(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}))
	})
}

// Plain runs the business insert in its own transaction (BEGIN, INSERT, COMMIT) and answers 201.
func Plain(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(r)
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		_, req, ok := readPayment(w, r)
		if !ok {
			return
		}
		p := payment{ID: newID(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(r.Context(), insertPayment, p.ID, t, p.Amount, p.Currency, p.To, req.Description)
			return err
		})
		if err != nil {
			http.Error(w, "store error", http.StatusServiceUnavailable)
			return
		}
		write(w, http.StatusCreated, created(p))
	})
}

// Handwritten is the blog recipe (package doc), keyed by the Idempotency-Key header.
func Handwritten(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(r)
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			http.Error(w, "key missing", http.StatusBadRequest)
			return
		}
		raw, req, ok := readPayment(w, r)
		if !ok {
			return
		}
		sum := sha256.Sum256(bytes.TrimSpace(raw))
		ctx := r.Context()

		tag, err := pool.Exec(ctx, `INSERT INTO handwritten_keys (tenant, key, fingerprint, status) VALUES ($1, $2, $3, 'started') ON CONFLICT DO NOTHING`, t, key, sum[:])
		if err != nil {
			http.Error(w, "store error", http.StatusServiceUnavailable)
			return
		}
		if tag.RowsAffected() == 0 {
			replay(ctx, w, pool, t, key, sum[:])
			return
		}
		p := payment{ID: newID(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
		if _, err := pool.Exec(ctx, insertPayment, p.ID, t, p.Amount, p.Currency, p.To, req.Description); err != nil {
			_, _ = pool.Exec(ctx, `DELETE FROM handwritten_keys WHERE tenant = $1 AND key = $2`, t, key)
			http.Error(w, "store error", http.StatusServiceUnavailable)
			return
		}
		body := created(p)
		if _, err := pool.Exec(ctx, `UPDATE handwritten_keys SET status = 'done', response_code = 201, response_body = $3 WHERE tenant = $1 AND key = $2`, t, key, body); err != nil {
			http.Error(w, "store error", http.StatusServiceUnavailable)
			return
		}
		write(w, http.StatusCreated, body)
	})
}

func replay(ctx context.Context, w http.ResponseWriter, pool *pgxpool.Pool, t, key string, sum []byte) {
	var (
		fp     []byte
		status string
		code   *int32
		body   []byte
	)
	err := pool.QueryRow(ctx, `SELECT fingerprint, status, response_code, response_body FROM handwritten_keys WHERE tenant = $1 AND key = $2`, t, key).Scan(&fp, &status, &code, &body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		http.Error(w, "in flight", http.StatusConflict) // deleted between our insert and select
	case err != nil:
		http.Error(w, "store error", http.StatusServiceUnavailable)
	case !bytes.Equal(fp, sum):
		http.Error(w, "payload mismatch", http.StatusUnprocessableEntity)
	case status != "done" || code == nil:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "in flight", http.StatusConflict)
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		write(w, int(*code), body)
	}
}
