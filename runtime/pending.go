package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file holds the transaction block that is opened by the handler's first statement
// (ClaimWithStatement, and the unguarded path of an optional key): BEGIN, and for a claim the
// advisory claim lock, are queued in front of that statement and travel in its round trip, so
// a new key costs the handler's statements plus two round trips (the read before, the record
// and COMMIT after), as many as the same handler in a plain BEGIN/…/COMMIT with pgx.
//
// A claim must still be announced while the handler runs, whatever the handler does before its
// first statement, so that a concurrent duplicate gets 409 (DESIGN section 4; cases 008, 009):
// if no statement comes within Config.ClaimDelay, a timer sends the claim alone, and when the
// claim is lost that way the handler's context is canceled so the 409 is not held up.

// claimState is where a pending block stands.
type claimState uint8

const (
	blockPending claimState = iota // nothing sent yet
	blockOpen                      // BEGIN ran and, for a claim, the lock is ours
	blockLost                      // the claim failed: see pendingBlock.err
)

// ErrClaimLost is the cause (context.Cause) of a handler context that the runtime canceled
// because the claim of the request's idempotency key, sent alone after Config.ClaimDelay, failed:
// a concurrent request holds the key (the client gets 409), or the store failed (503). The
// handler's work is rolled back; it may stop at once. The cause also wraps the specific error.
var ErrClaimLost = errors.New("runtime: the claim of the idempotency key failed; the handler's work is discarded")

// errClaimSuperseded is a claim whose key was completed by a concurrent request between our
// read and our lock; pendingBlock.rec holds that request's record.
var errClaimSuperseded = errors.New("idempotency key completed by a concurrent request")

// pendingBlock is the transaction block (and claim lock) of one request, not yet sent.
type pendingBlock struct {
	mu    sync.Mutex
	s     *store
	conn  *pgxpool.Conn
	claim *claimInput // nil: a plain block (unguarded handler), no lock
	state claimState
	err   error  // when blockLost: errClaimBusy, errClaimSuperseded or a store error
	rec   record // with errClaimSuperseded: the concurrent request's record
	// rechecked: the lock was taken by a statement of its own followed by a re-read of the
	// record, so a concurrent completion cannot have slipped in. A claim sent with the handler's
	// statement skips the re-read; the record's INSERT at completion (unique_violation) catches
	// that rare race instead, and the transaction rolls back with it.
	rechecked bool
	timer     *time.Timer
	cancel    context.CancelCauseFunc // cancels the handler's context when the claim is lost
	// settled: the handler has returned and the runtime owns the connection again; a timer
	// callback that fired but had not got the mutex yet must then do nothing.
	settled bool
}

// armTimer makes the claim go out alone after delay unless a statement has taken it along.
// ctx is the handler's context (canceled through cancel when the claim is lost).
func (p *pendingBlock) armTimer(ctx context.Context, delay time.Duration, cancel context.CancelCauseFunc) {
	p.cancel = cancel
	p.timer = time.AfterFunc(delay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.state == blockPending && !p.settled {
			if err := p.openAloneLocked(ctx); err != nil {
				p.cancel(fmt.Errorf("%w: %w", ErrClaimLost, err))
			}
		}
	})
}

// settle stops the timer and returns the block's state once nothing else can change it: after
// settle the caller alone uses the connection.
func (p *pendingBlock) settle() claimState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled = true
	p.stopTimer()
	return p.state
}

func (p *pendingBlock) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// locked runs f, which uses the connection directly, while the timer cannot use it.
func (p *pendingBlock) locked(f func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f()
}

// open makes sure the block is open before a statement that cannot carry it (a batch, COPY, a
// savepoint, the bare connection): it sends the block alone, and returns the claim's failure.
func (p *pendingBlock) open(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == blockPending {
		return p.openAloneLocked(ctx)
	}
	return p.err
}

// openAloneLocked sends BEGIN (and the claim) in a round trip of its own. The claim takes the
// lock with a statement that answers false rather than failing, then re-reads the record.
func (p *pendingBlock) openAloneLocked(ctx context.Context) error {
	if p.claim == nil {
		if _, err := p.conn.Exec(ctx, "BEGIN"); err != nil {
			return p.lost(err)
		}
		p.state = blockOpen
		return nil
	}
	claimed, rec, found, err := p.s.lockAtomic(ctx, p.conn, p.claim)
	switch {
	case err != nil:
		return p.lost(err)
	case found:
		p.rec = rec
		return p.lost(errClaimSuperseded)
	case !claimed:
		return p.lost(errClaimBusy)
	}
	p.state, p.rechecked = blockOpen, true
	return nil
}

func (p *pendingBlock) lost(err error) error {
	p.state, p.err = blockLost, err
	p.stopTimer()
	return err
}

// errStatementNotSent is a first statement whose arguments pgx could not encode after it had
// queued the claim in front of it: pgx then closes the connection (it cannot tell what the
// server has seen of an unfinished pipeline), so the request ends with the handler's error, 500.
var errStatementNotSent = errors.New("the handler's first statement could not be sent, and its connection was closed")

// sqlLockOrStop takes the claim lock ($1) or fails (SQLSTATE 22P02), so that the handler's
// statement queued behind it in the same pipeline never runs for a duplicate.
const sqlLockOrStop = `SELECT CAST(CASE WHEN pg_try_advisory_xact_lock($1::bigint) THEN '1'
	ELSE 'idemgen: the key is claimed by a concurrent request; this claim stops here (409)' END AS integer)`

// send runs the handler's statement sql with the pending block in front of it, in one pipeline,
// when it can (p.mu held, state pending). ok is false when the statement cannot join a batch:
// pgx batches take no exec-mode or result-format options, and a statement without arguments
// may hold several commands, which only the simple protocol runs.
func (p *pendingBlock) sendLocked(ctx context.Context, sql string, args []any) (br pgx.BatchResults, ok bool, err error) {
	if len(args) == 0 {
		return nil, false, nil
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
		return nil, false, nil
	}
	b := &pgx.Batch{}
	if p.claim != nil {
		if err := p.s.prepare(ctx, p.conn.Conn(), "BEGIN", sqlLockOrStop); err != nil {
			return nil, true, p.lost(err)
		}
	}
	b.Queue("BEGIN")
	if p.claim != nil {
		b.Queue(sqlLockOrStop, claimLockKey(p.claim.scope, p.claim.key))
	}
	b.Queue(sql, args...)
	conn := p.conn.Conn()
	br = conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil && p.claim != nil {
		_, err = br.Exec()
	}
	if err == nil {
		p.state = blockOpen
		p.stopTimer()
		return br, true, nil
	}
	br.Close()
	var pre pgx.ErrPreprocessingBatch
	switch {
	case isClaimStop(err):
		return nil, true, p.lost(errClaimBusy)
	case errors.As(err, &pre) && conn.IsClosed():
		return nil, true, p.lost(fmt.Errorf("%w: %w", errStatementNotSent, err))
	case !conn.IsClosed() && conn.PgConn().TxStatus() == 'I':
		// Nothing ran: pgx could not prepare the handler's statement (extended protocol), or
		// the server refused the whole multi-statement string before running any of it (a
		// syntax error, simple protocol). The block stays pending, the timer armed, and the
		// handler gets its own error.
		return nil, true, err
	}
	return nil, true, p.lost(err)
}

// exec is Exec with the block in front of the statement.
func (p *pendingBlock) exec(ctx context.Context, sql string, args []any) (pgconn.CommandTag, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == blockPending {
		br, ok, err := p.sendLocked(ctx, sql, args)
		if ok {
			if err != nil {
				return pgconn.CommandTag{}, err
			}
			ct, err := br.Exec()
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			return ct, err
		}
		if err := p.openAloneLocked(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	if p.state == blockLost {
		return pgconn.CommandTag{}, p.err
	}
	return p.conn.Conn().Exec(ctx, sql, args...)
}

// query is Query with the block in front of the statement.
func (p *pendingBlock) query(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == blockPending {
		br, ok, err := p.sendLocked(ctx, sql, args)
		if ok {
			if err != nil {
				return nil, err
			}
			rows, err := br.Query()
			if err != nil {
				br.Close()
				return nil, err
			}
			return &batchRows{Rows: rows, br: br}, nil
		}
		if err := p.openAloneLocked(ctx); err != nil {
			return nil, err
		}
	}
	if p.state == blockLost {
		return nil, p.err
	}
	return p.conn.Conn().Query(ctx, sql, args...)
}

// batchRows are the rows of the last statement of a batch: once they are read or closed, the
// batch is closed too, which reads the pipeline's end and frees the connection.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.finish()
}

func (r *batchRows) finish() {
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// rowsRow is the pgx.Row of a query sent through a pending block (err: it could not be sent).
type rowsRow struct {
	rows pgx.Rows
	err  error
}

// Scan reads the first row and closes the rows, as pgx's own Row does: pgx.ErrNoRows when
// there is none.
func (r rowsRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// readForClaim is the first step of a ClaimWithStatement claim: the read. It returns the
// connection (no transaction block open yet) when the key has no record, so the handler's
// first statement can carry the claim; otherwise the record (live or expired).
//
// The read does not try the claim lock in passing (it could, when the key has no record, and
// answer a duplicate of a claimed key 409 one round trip earlier): measured in one run, that
// made every replay 2 to 13% slower (bench/README.md), while a duplicate already gets its 409
// from the first statement's round trip, or after Config.ClaimDelay.
func (s *store) readForClaim(ctx context.Context, in *claimInput) (conn *pgxpool.Conn, rec record, found bool, err error) {
	conn, err = s.pool.Acquire(ctx)
	if err != nil {
		return nil, rec, false, fmt.Errorf("acquire: %w", err)
	}
	rec, found, err = s.read(ctx, conn.Conn(), in.scope, in.key)
	if err != nil || found {
		conn.Release()
		return nil, rec, found, err
	}
	return conn, rec, false, nil
}
