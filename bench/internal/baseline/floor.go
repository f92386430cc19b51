package baseline

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FloorSchema is the statements that create floor_records, a copy of the store's table: the
// same columns, widths, defaults, constraints and indexes (LIKE ... INCLUDING ALL). On the
// layout partitioned by expiry (partitioned) it is partitioned alike, by range of expires_at,
// into one default partition, so that an insertion is routed as the store's are. Run them
// after the store's migration.
func FloorSchema(partitioned bool) []string {
	if !partitioned {
		return []string{`CREATE TABLE IF NOT EXISTS floor_records (LIKE idempotency_records INCLUDING ALL)`}
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS floor_records (LIKE idempotency_records INCLUDING ALL) PARTITION BY RANGE (expires_at)`,
		`CREATE TABLE IF NOT EXISTS floor_records_default PARTITION OF floor_records DEFAULT`,
	}
}

// floorHeader is the stored headers of idemgen's response to createPayment: the allow-listed
// Content-Type as the store keeps it (a JSON object of string arrays).
var floorHeader = []byte(`{"Content-Type":["application/json"]}`)

// insertFloor is the store's completed-record INSERT on the plain table, into floor_records:
// the same columns and values (a completion made now, kept for 24 hours).
const insertFloor = `INSERT INTO floor_records (scope_id, key_id, created_at, expires_at, locked_until, fencing_token,
	fingerprint, fingerprint_version, response_status, body_omitted, operation, response_headers, response_body)
	VALUES ($1, $2, now(), statement_timestamp() + interval '24 hours', statement_timestamp(), $3, $4, 1, 201, false,
	'createPayment', $5, $6)`

// Floor is Plain that also stores the response with the business insert: besides the payment,
// the same transaction inserts a row into floor_records (FloorSchema) under a fresh key, with a
// stored response of idemgen's size (its headers and the same body), in the round trip of the
// COMMIT, as idemgen's commit does. No key is read, locked or checked: it is what storing the
// response with the business writes costs at least, the floor for idemgen's new key.
func Floor(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := tenant(r)
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		raw, req, ok := readPayment(w, r)
		if !ok {
			return
		}
		p := payment{ID: newID(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
		body := created(p)
		if err := storeFloor(r.Context(), pool, t, raw, p, req, body); err != nil {
			http.Error(w, "store error", http.StatusServiceUnavailable)
			return
		}
		write(w, http.StatusCreated, body)
	})
}

// storeFloor runs Floor's transaction: BEGIN, the payment's INSERT, then the record's INSERT
// and COMMIT pipelined.
func storeFloor(ctx context.Context, pool *pgxpool.Pool, tenant string, raw []byte, p payment, req paymentRequest, body []byte) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	committed := false
	defer func() {
		if !committed {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, insertPayment, p.ID, tenant, p.Amount, p.Currency, p.To, req.Description); err != nil {
		return err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	scope := sha256.Sum256([]byte(tenant))
	fp := sha256.Sum256(raw)
	b := &pgx.Batch{}
	b.Queue(insertFloor, int64(binary.BigEndian.Uint64(scope[:8])), pgtype.UUID{Bytes: key, Valid: true},
		int64(binary.BigEndian.Uint64(key[:8])>>1), fp[:], floorHeader, body)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("floor record: %w", err)
	}
	ct, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && ct.String() != "COMMIT" {
		err = fmt.Errorf("commit: %s", ct.String())
	}
	committed = err == nil
	return err
}
