package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// DBTX is what a handler writes through: the transaction that also holds the idempotency claim
// and stores the response. Its method set is that of pgx.Tx's query methods, and the interface
// sqlc generates for pgx/v5 (DBTX with Exec, Query, QueryRow, and CopyFrom and SendBatch when
// used), so `db.New(tx)` of sqlc-generated code takes it unchanged.
//
// The runtime commits or rolls it back: a final response commits the handler's writes with the
// record; an error, a panic or a non-final status rolls everything back. There is no Commit,
// Rollback or Begin: savepoints, if needed, are plain statements (SAVEPOINT, RELEASE
// SAVEPOINT, ROLLBACK TO SAVEPOINT).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// commitKind is how a transaction's record is written at Commit. It is fixed when the claim is
// made.
type commitKind uint8

const (
	// commitInsert: the claim holds only the advisory lock; the record is inserted completed.
	commitInsert commitKind = iota + 1
	// commitUpdate: the claim holds a running row under the token (a pipelined claim, an
	// expired row taken over, a lease-mode completion); the record is completed in place.
	commitUpdate
	// commitPlain: no record (an optional key was absent).
	commitPlain
)

// tx is a store.Tx[DBTX]: one pooled connection inside a transaction block that is open, or
// that will be opened by the handler's first statement (block).
type tx struct {
	s     *Store
	conn  *pgxpool.Conn
	sp    *claimSpec // nil for commitPlain
	token int64
	// horizon is the completion's tombstone horizon argument (tombstoneHorizon), given to pgx
	// as a pointer so that it is not boxed.
	horizon pgtype.Int8
	kind    commitKind
	// block, when set, is the transaction block (and claim) still to be opened: every
	// statement goes through it, the first one carrying it.
	block *pendingBlock
	// rechecked: the claim was made by statements of its own that also read the record under
	// the lock, so no concurrent completion can have slipped in. A claim sent with the
	// handler's statement skips that re-read; the record INSERT at Commit (unique_violation),
	// or Abort's read, catches that rare race instead.
	rechecked bool
	// held: the session on conn holds the key's claim lock (ClaimWithStatement.LockAtRead),
	// to be released after COMMIT or ROLLBACK, in the same round trip; a connection still
	// holding it at the end is closed.
	held bool
	// releaseOnAbort: a lease-mode completion, whose running record Abort deletes.
	releaseOnAbort bool
	// slot: the transaction holds one of the store's handler slots (Options.ReservedConns),
	// given back with the connection.
	slot   bool
	tenant slotTenant
	// entered: the key is among the Store's claims in progress (inflight.go) until end.
	entered bool
	// gone: the connection, the slot and the key are given back (giveUp): by end, or, for a
	// claim lost while its handler still runs, by giveBack, before the handler returns.
	gone   bool
	cancel context.CancelCauseFunc
	// kept is the response stored by a successful Commit (store.Kept): its body omitted when
	// the scope was over its stored-bytes cap.
	kept *store.Response
	// mu guards ended: a statement through DB holds it shared while it is sent, end holds it
	// to give the connection back, so a handle used after its transaction ended (a handler
	// that kept it, a framework bridge that ran the handler late) gets store.ErrTxDone rather
	// than a connection that is no longer its own, or a nil one.
	mu    sync.RWMutex
	ended bool
}

// end marks the transaction ended (a statement through DB then gets store.ErrTxDone), gives
// the connection and the handler slot back, and wakes the duplicates of this process that
// wait for the key's claim: the transaction has committed or rolled back by now.
func (t *tx) end() {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	t.giveUp()
}

// giveUp gives the connection, the handler slot and the key back, once (end, giveBack).
func (t *tx) giveUp() {
	if t.gone {
		return
	}
	t.gone = true
	if t.held && !t.conn.Conn().IsClosed() {
		closeConn(t.conn) // never back to the pool holding the claim lock
	}
	t.held = false
	t.conn.Release()
	if t.slot {
		t.slot = false
		t.s.freeSlot(t.tenant)
	}
	if t.entered {
		t.entered = false
		t.s.claiming.leave(t.sp.d.key.Bytes)
	}
	if t.sp != nil {
		t.s.waiting.signal(t.sp.d.key.Bytes)
	}
}

// giveBack ends the transaction of a claim that was lost (its pending block's, sent alone by
// the timer or with a statement) while the handler still runs: every later statement of the
// handler fails with the loss without touching the connection, so the connection, the handler
// slot and the key go back now rather than when the handler returns. A duplicate answered
// 409 thus holds a connection for its read and its lost claim, never for its handler's time.
// The block's mutex is held, and a statement of the handler through DB may hold t.mu shared
// (the loss can come from its own statement): so giveBack leaves ended to end, and gives
// back only what no statement touches any more.
func (t *tx) giveBack() {
	t.rollback()
	t.giveUp()
}

func newTx(s *Store, conn *pgxpool.Conn, sp *claimSpec, token int64, kind commitKind, block *pendingBlock) *tx {
	t := &tx{s: s, conn: conn, sp: sp, token: token, kind: kind, block: block}
	if block != nil && block.claim != nil {
		block.onLost = t.giveBack
	}
	if sp != nil {
		t.tenant = sp.tenant
	}
	t.releaseOnAbort = kind == commitUpdate && sp != nil && sp.Lease > 0
	return t
}

// HandlerContext arms the background claim of a ClaimWithStatement block: the returned context
// is canceled with cause store.ErrClaimLost when that claim fails. Call it once, right before the
// handler runs.
func (t *tx) HandlerContext(parent context.Context) context.Context {
	if t.block == nil || t.block.claim == nil {
		return parent
	}
	ctx, cancel := context.WithCancelCause(parent)
	t.cancel = cancel
	t.block.armTimer(ctx, cancel)
	return ctx
}

// DB returns the handle the handler writes through.
func (t *tx) DB() DBTX { return dbtx{t} }

// Confirm sends a lazy claim alone now (one round trip), so that the handler starts only when
// the key is ours.
func (t *tx) Confirm(ctx context.Context) error {
	if t.block == nil || t.block.claim == nil {
		return nil
	}
	return t.block.open(ctx)
}

// settle ends the handler's use of the connection: it stops the claim timer and, when send is
// set and the handler sent no statement, sends the claim alone now. It returns the claim's
// failure, and whether a transaction block is open.
func (t *tx) settle(ctx context.Context, send bool) (open bool, err error) {
	if t.cancel != nil {
		defer t.cancel(nil)
	}
	if t.block == nil {
		return true, nil
	}
	state, err := t.block.settle()
	if state == blockPending && send && t.block.claim != nil {
		// The handler sent no statement and its answer is final: the claim goes alone now.
		err = t.block.open(ctx)
		state = t.block.state
	}
	return state == blockOpen, err
}

// Commit stores resp and commits, in one round trip (the record statement and COMMIT
// pipelined), even if the client has gone away meanwhile.
func (t *tx) Commit(ctx context.Context, resp store.Response) error {
	defer t.end()
	open, err := t.settle(ctx, true)
	if err != nil {
		if !t.gone {
			t.rollback()
		}
		return err
	}
	if t.conn.Conn().PgConn().TxStatus() == 'E' {
		// A statement failed and the handler went on to answer: its writes are gone with the
		// failed transaction, so its answer must not be stored or sent as a success.
		t.rollback()
		return store.ErrTxFailed
	}
	switch {
	case t.kind == commitPlain && !open:
		return nil // nothing was sent: nothing to commit
	case t.kind == commitPlain:
		err = t.commitOnly(ctx)
	case t.kind == commitInsert:
		err = t.insertAndCommit(ctx, &resp)
	default:
		err = t.completeAndCommit(ctx, &resp)
	}
	if err == nil && t.kind != commitPlain {
		t.kept = &resp
	}
	if err != nil {
		t.rollback()
		if errors.Is(err, store.ErrLost) && t.kind == commitInsert {
			// Our INSERT met a row: a concurrent request completed the key between our read
			// and our lock (the claim rode the handler's statement without a re-read), or a row
			// was written without the lock. Answer from it when it is a live record.
			if c := t.completedMeanwhile(ctx); c != nil {
				return c
			}
		}
	}
	return err
}

// Kept returns the response the last Commit stored (store.Kept).
func (t *tx) Kept() (store.Response, bool) {
	if t.kept == nil {
		return store.Response{}, false
	}
	return *t.kept, true
}

// Abort rolls back and releases the claim; see store.Tx. A connection that is gone (the
// server terminated the session, the network broke) is the store's failure, not the
// handler's: its transaction was rolled back by the server.
func (t *tx) Abort(ctx context.Context) error {
	defer t.end()
	open, err := t.settle(ctx, false)
	if t.gone {
		return err // the claim was lost, and all of it given back then
	}
	wasClosed := t.conn.Conn().IsClosed()
	t.rollback()
	if err != nil {
		return err
	}
	if wasClosed {
		err = errSessionEnded
	}
	switch {
	case t.releaseOnAbort:
		// A failed release leaves the lease to end on its own; the retry then takes over.
		_ = t.s.Release(ctx, t.sp.ID, t.token)
	case t.sp != nil && t.sp.Calls:
		// A paired lease store's completion (its claim is elsewhere, which it releases itself):
		// its calls are released with it. A failure leaves them started, as for a killed process.
		_ = t.s.ReleaseCalls(ctx, t.sp.ID)
	}
	if err != nil {
		return err
	}
	if open && t.sp != nil && !t.rechecked {
		// A handler error may come from the race the claim did not re-read for: a business row
		// that a concurrent request wrote and completed. Answer from that record if so.
		if c := t.completedMeanwhile(ctx); c != nil {
			return c
		}
	}
	return nil
}

// rollback ends the transaction block, if any, and releases a claim lock the session holds, in
// one round trip; when that fails the connection is closed, which does both. The two travel as
// one simple-protocol query: in an aborted block the extended protocol could not even describe
// the release, and the lock key is an integer of ours, never a client's value.
func (t *tx) rollback() {
	c := t.conn.Conn()
	if !t.held || c.IsClosed() {
		t.held = false
		t.s.rollback(t.conn)
		return
	}
	t.held = false
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sql := strings.ReplaceAll(sqlUnlock, "$1", "("+strconv.FormatInt(t.sp.d.lock, 10)+")")
	if c.PgConn().TxStatus() != 'I' {
		sql = "ROLLBACK; " + sql
	}
	res, err := c.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil || len(res) == 0 {
		_ = c.Close(ctx)
		return
	}
	last := res[len(res)-1]
	if last.Err != nil || len(last.Rows) != 1 || string(last.Rows[0][0]) != "t" {
		_ = c.Close(ctx)
	}
}

// completedMeanwhile reads the key's record after our transaction was rolled back; it returns
// the *store.CompletedError of a live record, or nil.
func (t *tx) completedMeanwhile(ctx context.Context) error {
	r, err := t.s.read(ctx, t.conn.Conn(), t.sp.d, t.sp.Operation)
	if err != nil || r == nil || !r.live {
		return nil
	}
	return &store.CompletedError{Record: r.rec}
}

// commitOnly commits a plain transaction.
func (t *tx) commitOnly(ctx context.Context) error {
	ct, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return commitError(err)
	}
	if ct.String() != "COMMIT" {
		return fmt.Errorf("commit: the transaction rolled back (%s)", ct.String())
	}
	return nil
}

// insertAndCommit inserts the completed record and commits: one round trip.
func (t *tx) insertAndCommit(ctx context.Context, r *store.Response) error {
	q := t.s.q.insertCompleted
	prep := t.s.commitStatements(q)
	if t.held {
		prep = append(prep, "BEGIN", sqlUnlock)
	}
	if err := t.s.prepare(ctx, t.conn.Conn(), prep...); err != nil {
		return fmt.Errorf("store response: %w", err)
	}
	resp := responseArgs(r, t.sp.Retention)
	b := &pgx.Batch{}
	// A claim held from the read whose handler sent no statement has no block open yet.
	begin := t.held && t.conn.Conn().PgConn().TxStatus() == 'I'
	if begin {
		b.Queue("BEGIN")
	}
	charge := t.s.queueChargeBody(b, t.sp, r)
	b.Queue(q, t.sp.d.scope, t.sp.d.key, t.sp.Operation, t.sp.Fingerprint.Sum[:],
		int16(t.sp.Fingerprint.Version), t.token, resp[0], resp[1], resp[2], resp[3], resp[4], t.tombstoneHorizon())
	t.queueSettleCalls(b, r)
	b.Queue("COMMIT")
	if t.held {
		b.Queue(sqlUnlock, t.sp.d.lock)
	}
	return t.sendCommit(ctx, b, begin, charge, r, func(err error) error {
		if isStop(err) || isUniqueViolation(err) {
			return store.ErrLost
		}
		return fmt.Errorf("store response: %w", err)
	})
}

// isUniqueViolation reports SQLSTATE 23505: the plain table's primary key refused our record
// INSERT because the key has a record anyway (one that a concurrent completion committed
// between our read and our lock, or that a claim without the advisory lock inserted, which our
// INSERT waited for: Options.NoAdvisoryLocks).
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// tombstoneHorizon is the completion's last argument, tombstoneHorizon of the claim.
func (t *tx) tombstoneHorizon() *pgtype.Int8 {
	t.horizon = pgtype.Int8{Int64: tombstoneHorizon(&t.sp.Claim), Valid: true}
	return &t.horizon
}

// completeAndCommit completes the running record under our token and commits: one round trip.
func (t *tx) completeAndCommit(ctx context.Context, r *store.Response) error {
	q := t.s.q.completeOrStop
	if err := t.s.prepare(ctx, t.conn.Conn(), t.s.commitStatements(q)...); err != nil {
		return fmt.Errorf("store response: %w", err)
	}
	b := &pgx.Batch{}
	charge := t.s.queueChargeBody(b, t.sp, r)
	args := append([]any{t.sp.d.scope, t.sp.d.key, t.token}, responseArgs(r, t.sp.Retention)...)
	b.Queue(q, append(args, t.tombstoneHorizon())...)
	t.queueSettleCalls(b, r)
	b.Queue("COMMIT")
	return t.sendCommit(ctx, b, false, charge, r, func(err error) error {
		if isStop(err) || isMoved(err) {
			return store.ErrLost
		}
		return fmt.Errorf("store response: %w", err)
	})
}

// queueSettleCalls queues, for a lease-mode completion whose call phase recorded calls
// (store.Claim.Calls), the statement that writes the completion's outcome to them: it commits
// with the record, in the same round trip.
func (t *tx) queueSettleCalls(b *pgx.Batch, r *store.Response) {
	if t.sp.Calls {
		b.Queue(sqlSettleCalls, t.sp.d.scope, t.sp.d.key, int16(r.Status))
	}
}

// sendCommit sends b: BEGIN when begin is set, the count of the response's stored bytes when
// charge is set (when the tenant was over its cap resp loses its body; a reservation counted
// ahead is kept once the transaction committed), a record statement, the statements that go
// with it, COMMIT, and the release of the claim lock the session holds (t.held), and reads
// every answer; recordErr maps the record statement's error.
func (t *tx) sendCommit(ctx context.Context, b *pgx.Batch, begin bool, charge *bodyCharge, resp *store.Response, recordErr func(error) error) (err error) {
	defer func() {
		if err != nil {
			t.s.unsettled(charge)
		}
	}()
	br := t.conn.SendBatch(ctx, b)
	around := 2 // the record statement and COMMIT
	if begin {
		around++
		if _, err := br.Exec(); err != nil {
			br.Close()
			if isServerError(err) {
				return fmt.Errorf("begin: %w", err) // COMMIT never ran
			}
			return commitError(err)
		}
	}
	if t.held {
		around++
	}
	if charge != nil {
		if err := charge.read(br); err != nil {
			br.Close()
			if isServerError(err) {
				return fmt.Errorf("count the response: %w", err) // COMMIT never ran
			}
			return commitError(err)
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return recordErr(err) // the server refused it: COMMIT never ran
		}
		return commitError(err)
	}
	if charge != nil && charge.kept == "false" {
		resp.Body, resp.BodyOmitted = nil, true
	}
	// Between the record and COMMIT: the outcome of the calls (Claim.Calls).
	for range b.Len() - around - charge.statements() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				return fmt.Errorf("store response: %w", err)
			}
			return commitError(err)
		}
	}
	ct, err := br.Exec()
	if err == nil && t.held {
		// After COMMIT (or the ROLLBACK tag of a failed one), whatever it answered: when the
		// release fails, end closes the connection.
		var released bool
		if uerr := br.QueryRow().Scan(&released); uerr == nil && released {
			t.held = false
		}
	}
	closeErr := br.Close()
	switch {
	case err == nil && ct.String() == "COMMIT":
		// Acknowledged: it committed, whatever the connection does next (a session terminated
		// right after its commit still answers COMMIT, then fails the pipeline's end).
		t.s.settled(charge)
		return nil
	case err == nil && closeErr == nil:
		return fmt.Errorf("commit: the transaction rolled back (%s)", ct.String())
	case err == nil:
		err = closeErr
	}
	return commitError(err)
}

// errSessionEnded is a transaction whose database session ended under it: the server rolled it
// back.
var errSessionEnded = errors.New("the database session of the transaction ended; it was rolled back")

// commitError classifies an error met while a COMMIT was on its way: an error the server
// answered (a failed deferred constraint, a serialization failure) or one raised before
// anything was sent means nothing committed; a lost session (SQLSTATE class 08 or 57P, such as
// a terminated backend), a broken connection or a timeout while waiting for the answer leaves
// the outcome unknown.
func commitError(err error) error {
	if pgconn.SafeToRetry(err) || (isServerError(err) && !sessionLost(err)) {
		return fmt.Errorf("commit: %w", err)
	}
	return fmt.Errorf("commit: %w: %w", store.ErrOutcomeUnknown, err)
}

// isServerError reports an error the server answered.
func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// sessionLost reports an error that means the database session is gone: the server terminated
// it (SQLSTATE class 57P: admin or crash shutdown), a connection exception (class 08), or a
// connection that is closed or broken on our side.
func sessionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08") || pe.Severity == "FATAL" || pe.Severity == "PANIC"
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) && isNetError(err)
}

// dbtx is the DBTX of a tx: statements go through its pending block while there is one. Once
// the transaction has ended, every method returns store.ErrTxDone.
type dbtx struct{ t *tx }

// use holds the transaction open for one statement; false once it has ended (release is then
// a no-op).
func (d dbtx) use() (release func(), ok bool) {
	d.t.mu.RLock()
	if d.t.ended {
		d.t.mu.RUnlock()
		return func() {}, false
	}
	return d.t.mu.RUnlock, true
}

func (d dbtx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	release, ok := d.use()
	defer release()
	switch {
	case !ok:
		return pgconn.CommandTag{}, store.ErrTxDone
	case d.t.block != nil:
		return d.t.block.exec(ctx, sql, args)
	}
	return d.t.conn.Exec(ctx, sql, args...)
}

func (d dbtx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	release, ok := d.use()
	defer release()
	switch {
	case !ok:
		return nil, store.ErrTxDone
	case d.t.block != nil:
		return d.t.block.query(ctx, sql, args)
	}
	return d.t.conn.Query(ctx, sql, args...)
}

func (d dbtx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	release, ok := d.use()
	defer release()
	switch {
	case !ok:
		return rowsRow{err: store.ErrTxDone}
	case d.t.block != nil:
		rows, err := d.t.block.query(ctx, sql, args)
		return rowsRow{rows: rows, err: err}
	}
	return d.t.conn.QueryRow(ctx, sql, args...)
}

// CopyFrom cannot carry the pending block: the block (and claim) is sent alone first.
func (d dbtx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	release, ok := d.use()
	defer release()
	if !ok {
		return 0, store.ErrTxDone
	}
	if d.t.block != nil {
		if err := d.t.block.open(ctx); err != nil {
			return 0, err
		}
	}
	return d.t.conn.CopyFrom(ctx, table, cols, src)
}

// SendBatch cannot carry the pending block: the block (and claim) is sent alone first.
func (d dbtx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	release, ok := d.use()
	defer release()
	if !ok {
		return errBatch{store.ErrTxDone}
	}
	if d.t.block != nil {
		if err := d.t.block.open(ctx); err != nil {
			return errBatch{err}
		}
	}
	return d.t.conn.SendBatch(ctx, b)
}

// errBatch is the pgx.BatchResults of a batch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return rowsRow{err: b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// isNetError reports a network-level failure (a reset or closed connection).
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}
