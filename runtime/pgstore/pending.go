package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// This file holds the transaction block that is opened by the handler's first statement
// (ClaimWithStatement, and BeginPlain): BEGIN, and for a claim the advisory claim lock, are
// queued in front of that statement and travel in its round trip, so a new key costs the
// handler's statements plus two round trips (the read before, the record and COMMIT after), as
// many as the same handler in a plain BEGIN/…/COMMIT with pgx.
//
// A claim must still be announced while the handler runs, whatever the handler does before its
// first statement, so that a concurrent duplicate gets 409: if no statement comes within the
// strategy's Delay, a timer sends the claim alone, and when the claim is lost that way the
// handler's context is canceled so the 409 is not held up.

// blockState is where a pending block stands.
type blockState uint8

const (
	blockPending blockState = iota // nothing sent yet
	blockOpen                      // BEGIN ran and, for a claim, the lock is ours
	blockLost                      // the claim failed: see pendingBlock.err
)

// pendingBlock is the transaction block (and claim lock) of one request, not yet sent.
type pendingBlock struct {
	mu    sync.Mutex
	s     *Store
	conn  *pgxpool.Conn
	claim *claimSpec // nil: a plain block, no lock
	// held: the claim lock is already the session's (ClaimWithStatement.LockAtRead), so the
	// block is BEGIN alone, with the connection check of a claim.
	held  bool
	delay time.Duration
	state blockState
	// err, when blockLost, is how the claim was lost, as the runtime answers it: store.ErrBusy,
	// *store.CompletedError, store.ErrTxFailed (the first statement could not be sent) or the
	// store's own error.
	err   error
	timer *time.Timer
	// settled: the handler has returned and the transaction owns the connection again; a timer
	// callback that fired but had not got the mutex yet must then do nothing.
	settled bool
	// onLost, for a claim, gives the transaction's connection, slot and key back when the
	// claim is lost (tx.giveBack); it runs under mu.
	onLost func()
}

// armTimer makes the claim go out alone after the delay unless a statement has taken it
// along. ctx is the handler's context, canceled through cancel when the claim is lost.
func (p *pendingBlock) armTimer(ctx context.Context, cancel context.CancelCauseFunc) {
	p.timer = time.AfterFunc(p.delay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.state == blockPending && !p.settled {
			if err := p.openAloneLocked(ctx); err != nil {
				cancel(fmt.Errorf("%w: %w", store.ErrClaimLost, err))
			}
		}
	})
}

// settle stops the timer and returns the block's state once nothing else can change it: after
// settle the caller alone uses the connection.
func (p *pendingBlock) settle() (blockState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled = true
	p.stopTimer()
	return p.state, p.err
}

func (p *pendingBlock) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// open makes sure the block is open before a statement that cannot carry it (a batch, COPY):
// it sends the block alone, and returns the claim's failure.
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
		if err := p.begin(ctx); err != nil {
			return p.lost(err)
		}
		p.state = blockOpen
		return nil
	}
	r, err := p.s.lockAndRead(ctx, p.conn, p.claim)
	switch {
	case errors.Is(err, store.ErrBusy) || isLockTimeout(err):
		return p.lost(store.ErrBusy)
	case err != nil:
		return p.lost(err)
	case r != nil && r.live:
		return p.lost(&store.CompletedError{Record: r.rec})
	case r != nil:
		// Completed and already expired between our read and our lock (a retention of
		// milliseconds): the key is free again; the client's retry claims it.
		return p.lost(store.ErrBusy)
	}
	p.state = blockOpen
	return nil
}

// begin sends BEGIN, and for a claim already held the connection check, in one round trip.
func (p *pendingBlock) begin(ctx context.Context) error {
	if !p.held || !p.s.checks(p.conn.Conn()) {
		_, err := p.conn.Exec(ctx, "BEGIN")
		return err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlSetCheckInterval, p.s.checkInterval)
	return p.conn.SendBatch(ctx, b).Close()
}

func (p *pendingBlock) lost(err error) error {
	p.state, p.err = blockLost, err
	p.stopTimer()
	if p.onLost != nil {
		p.onLost()
	}
	return err
}

// errStatementNotSent is a first statement whose arguments pgx could not encode after it had
// queued the claim in front of it: pgx then closes the connection (it cannot tell what the
// server has seen of an unfinished pipeline), so the request ends with 500.
var errStatementNotSent = errors.New("the handler's first statement could not be sent, and its connection was closed")

// sendLocked runs the handler's statement sql with the pending block in front of it, in one
// pipeline, when it can (p.mu held, state pending). ok is false when the statement cannot join
// a batch: pgx batches take no exec-mode or result-format options, and a statement without
// arguments may hold several commands, which only the simple protocol runs.
func (p *pendingBlock) sendLocked(ctx context.Context, sql string, args []any) (br pgx.BatchResults, ok bool, err error) {
	if len(args) == 0 {
		return nil, false, nil
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
		return nil, false, nil
	}
	b := &pgx.Batch{}
	lock, lockArgs := p.s.q.lockOrStop, []any(nil)
	// checkApart: the connection check goes in a statement of its own, after the lock (Citus,
	// where the lock is taken on a worker and the check is the coordinator's).
	checkApart := false
	if p.claim != nil {
		lockArgs = p.s.lockArgs(p.claim.d)
		if p.s.checks(p.conn.Conn()) {
			if p.s.q.lockOrStopChecked != "" {
				lock, lockArgs = p.s.q.lockOrStopChecked, append(lockArgs, p.s.checkInterval)
			} else {
				checkApart = true
			}
		}
		if err := p.s.prepare(ctx, p.conn.Conn(), "BEGIN", lock, sqlSetCheckInterval); err != nil {
			return nil, true, p.lost(err)
		}
		// The handler's statement is prepared by name too: when the lock fails (a duplicate),
		// pgx drops every statement of the failed batch from its statement cache, and the next
		// use of this statement on the connection would pay a deallocation and a re-prepare.
		// A statement pgx cannot prepare (a syntax error) fails here, before anything ran: the
		// block stays pending and the handler gets its error.
		if err := p.s.prepare(ctx, p.conn.Conn(), sql); err != nil {
			return nil, true, err
		}
	}
	b.Queue("BEGIN")
	switch {
	case p.claim != nil:
		b.Queue(lock, lockArgs...)
		if checkApart {
			b.Queue(sqlSetCheckInterval, p.s.checkInterval)
		}
	case p.held && p.s.checks(p.conn.Conn()):
		b.Queue(sqlSetCheckInterval, p.s.checkInterval)
	}
	b.Queue(sql, args...)
	conn := p.conn.Conn()
	br = conn.SendBatch(ctx, b)
	_, err = br.Exec()
	for i := 2; err == nil && i < b.Len(); i++ {
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
	case isStop(err) || isLockTimeout(err):
		return nil, true, p.lost(store.ErrBusy)
	case errors.As(err, &pre) && conn.IsClosed() && !sessionLost(err):
		return nil, true, p.lost(fmt.Errorf("%w: %w: %w", store.ErrTxFailed, errStatementNotSent, err))
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
