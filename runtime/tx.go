package runtime

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTxManaged is returned by Commit and Rollback of the transaction a handler is given: the
// runtime commits it together with the idempotency record when the response is final, and rolls
// it back otherwise (return an error or a non-final status to roll back). A handler's
// `defer tx.Rollback(ctx)` is therefore harmless.
var ErrTxManaged = errors.New("runtime: the idempotency runtime commits or rolls back this transaction")

// managedTx is the pgx.Tx handed to handlers: a connection already inside a transaction block
// that the runtime opened (in atomic mode, within the claim's own round trip, which pgx's own Tx
// cannot represent). Nested Begin makes savepoints, as pgx does.
type managedTx struct {
	conn       *pgx.Conn
	savepoints int64
}

var _ pgx.Tx = (*managedTx)(nil)

func (t *managedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	t.savepoints++
	name := "idemgen_sp_" + strconv.FormatInt(t.savepoints, 10)
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &savepointTx{parent: t, name: name}, nil
}

func (t *managedTx) Commit(context.Context) error   { return ErrTxManaged }
func (t *managedTx) Rollback(context.Context) error { return ErrTxManaged }

func (t *managedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *managedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is served through a pgx transaction object on the same connection: pgx only
// builds LargeObjects for its own Tx, and a BEGIN inside the open block is a no-op warning.
func (t *managedTx) LargeObjects() pgx.LargeObjects {
	inner, err := t.conn.Begin(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return inner.LargeObjects()
}

func (t *managedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *managedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *managedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *managedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *managedTx) Conn() *pgx.Conn { return t.conn }

// savepointTx is a nested transaction: Commit releases the savepoint, Rollback rolls back to it.
type savepointTx struct {
	parent *managedTx
	name   string
	closed bool
}

var _ pgx.Tx = (*savepointTx)(nil)

func (s *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) { return s.parent.Begin(ctx) }

func (s *savepointTx) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.parent.conn.Exec(ctx, "RELEASE SAVEPOINT "+s.name)
	return err
}

func (s *savepointTx) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.parent.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+s.name)
	return err
}

func (s *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return s.parent.CopyFrom(ctx, table, cols, src)
}
func (s *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return s.parent.SendBatch(ctx, b)
}
func (s *savepointTx) LargeObjects() pgx.LargeObjects { return s.parent.LargeObjects() }
func (s *savepointTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return s.parent.Prepare(ctx, name, sql)
}
func (s *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.parent.Exec(ctx, sql, args...)
}
func (s *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.parent.Query(ctx, sql, args...)
}
func (s *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.parent.QueryRow(ctx, sql, args...)
}
func (s *savepointTx) Conn() *pgx.Conn { return s.parent.conn }
