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

// managedTx is the pgx.Tx handed to handlers: a connection inside a transaction block that the
// runtime opened, or will open with the handler's first statement (block, see pending.go);
// pgx's own Tx can represent neither. Nested Begin makes savepoints, as pgx does.
type managedTx struct {
	conn       *pgx.Conn
	savepoints int64
	// block, when set, is the transaction block (and claim) still to be opened: every statement
	// goes through it, the first one carrying it.
	block *pendingBlock
}

// open makes sure the block is open, for the methods whose statements cannot carry it.
func (t *managedTx) open(ctx context.Context) error {
	if t.block == nil {
		return nil
	}
	return t.block.open(ctx)
}

var _ pgx.Tx = (*managedTx)(nil)

func (t *managedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.open(ctx); err != nil {
		return nil, err
	}
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
	if err := t.open(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *managedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.open(ctx); err != nil {
		return errBatch{err}
	}
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is served through a pgx transaction object on the same connection: pgx only
// builds LargeObjects for its own Tx, and a BEGIN inside the open block is a no-op warning.
func (t *managedTx) LargeObjects() pgx.LargeObjects {
	if err := t.open(context.Background()); err != nil {
		return pgx.LargeObjects{}
	}
	inner, err := t.conn.Begin(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return inner.LargeObjects()
}

func (t *managedTx) Prepare(ctx context.Context, name, sql string) (sd *pgconn.StatementDescription, err error) {
	if t.block == nil {
		return t.conn.Prepare(ctx, name, sql)
	}
	err = t.block.locked(func() error {
		sd, err = t.conn.Prepare(ctx, name, sql)
		return err
	})
	return sd, err
}

func (t *managedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.block != nil {
		return t.block.exec(ctx, sql, args)
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *managedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.block != nil {
		return t.block.query(ctx, sql, args)
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *managedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.block != nil {
		rows, err := t.block.query(ctx, sql, args)
		return rowsRow{rows: rows, err: err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

// Conn returns the connection, inside the open transaction block. When the block could not be
// opened (the claim was lost) and the connection is outside any block, it is closed, so that
// nothing the handler sends on it can commit on its own; the runtime answers 409 or 503.
func (t *managedTx) Conn() *pgx.Conn {
	if err := t.open(context.Background()); err != nil && t.conn.PgConn().TxStatus() == 'I' {
		_ = t.conn.Close(context.Background())
	}
	return t.conn
}

// errBatch is the pgx.BatchResults of a batch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return rowsRow{err: b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

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
func (s *savepointTx) Conn() *pgx.Conn { return s.parent.Conn() }
