// Package db holds the service's SQL in the shape sqlc generates for pgx/v5 (written by hand
// here, so that the example needs no sqlc): a DBTX interface, New, and one method per query.
// Code like this runs unchanged inside idemgen's middleware: pgstore.DBTX, the transaction the
// middleware holds for a marked request, has DBTX's methods.
package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what the queries run on, as sqlc declares it: *pgxpool.Pool, pgx.Tx and
// pgstore.DBTX satisfy it.
type DBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
	Query(context.Context, string, ...interface{}) (pgx.Rows, error)
	QueryRow(context.Context, string, ...interface{}) pgx.Row
}

// New returns the queries over db.
func New(db DBTX) *Queries { return &Queries{db: db} }

// Queries runs the service's statements on one DBTX.
type Queries struct{ db DBTX }

const insertPayment = `INSERT INTO payments (id, tenant, amount, currency, to_account, description)
VALUES ($1, $2, $3, $4, $5, $6)`

type InsertPaymentParams struct {
	ID          string
	Tenant      string
	Amount      int64
	Currency    string
	ToAccount   string
	Description *string
}

func (q *Queries) InsertPayment(ctx context.Context, arg InsertPaymentParams) error {
	_, err := q.db.Exec(ctx, insertPayment, arg.ID, arg.Tenant, arg.Amount, arg.Currency, arg.ToAccount, arg.Description)
	return err
}

const getPayment = `SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`

type GetPaymentRow struct {
	ID        string
	Amount    int64
	Currency  string
	ToAccount string
}

func (q *Queries) GetPayment(ctx context.Context, tenant, id string) (GetPaymentRow, error) {
	var i GetPaymentRow
	err := q.db.QueryRow(ctx, getPayment, tenant, id).Scan(&i.ID, &i.Amount, &i.Currency, &i.ToAccount)
	return i, err
}

const paymentExists = `SELECT EXISTS (SELECT 1 FROM payments WHERE tenant = $1 AND id = $2)`

func (q *Queries) PaymentExists(ctx context.Context, tenant, id string) (bool, error) {
	var exists bool
	err := q.db.QueryRow(ctx, paymentExists, tenant, id).Scan(&exists)
	return exists, err
}

const insertRefund = `INSERT INTO refunds (id, tenant, payment_id, amount, reason) VALUES ($1, $2, $3, $4, $5)`

type InsertRefundParams struct {
	ID        string
	Tenant    string
	PaymentID string
	Amount    int64
	Reason    *string
}

func (q *Queries) InsertRefund(ctx context.Context, arg InsertRefundParams) error {
	_, err := q.db.Exec(ctx, insertRefund, arg.ID, arg.Tenant, arg.PaymentID, arg.Amount, arg.Reason)
	return err
}

const insertOrder = `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`

func (q *Queries) InsertOrder(ctx context.Context, id, tenant, payerName string, lines int32) error {
	_, err := q.db.Exec(ctx, insertOrder, id, tenant, payerName, lines)
	return err
}

const insertTransfer = `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`

func (q *Queries) InsertTransfer(ctx context.Context, id, tenant string, amount int64, destination string) error {
	_, err := q.db.Exec(ctx, insertTransfer, id, tenant, amount, destination)
	return err
}

const insertCharge = `INSERT INTO charges (id, tenant, amount, currency, description) VALUES ($1, $2, $3, $4, $5)`

func (q *Queries) InsertCharge(ctx context.Context, id, tenant string, amount int64, currency string, description *string) error {
	_, err := q.db.Exec(ctx, insertCharge, id, tenant, amount, currency, description)
	return err
}

const insertProviderCharge = `INSERT INTO provider_charges (id, tenant, amount, provider_reference)
VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`

// InsertProviderCharge records a provider charge once per id: a second insert of the same id
// (the retry of an attempt that failed after writing it) changes nothing.
func (q *Queries) InsertProviderCharge(ctx context.Context, id, tenant string, amount int64, reference string) error {
	_, err := q.db.Exec(ctx, insertProviderCharge, id, tenant, amount, reference)
	return err
}
