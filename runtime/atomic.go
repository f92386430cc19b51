package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// maxClaimAttempts bounds the claim loop: each extra attempt follows a race that the database
// resolved under us (a conflicting claim rolled back, a row swept or taken over).
const maxClaimAttempts = 4

// runAtomic is the atomic-mode state machine for a present, valid key.
func (rt *Runtime) runAtomic(x *Exchange, key string, fp canonical.Fingerprint, fn AtomicFunc) {
	op := x.op
	in := claimInput{
		scope: x.scope, key: storedKey(op, key), op: op.ID, fp: fp,
		retention: retentionOf(op), lockTimeout: rt.cfg.ConflictTimeout,
	}
	switch {
	case rt.cfg.NoAdvisoryLocks:
		in.lock, in.lockTimeout = lockNone, max(rt.cfg.ConflictTimeout, op.Wait)
	case op.Wait > 0:
		in.lock, in.lockTimeout = lockWait, op.Wait
	default:
		in.lock = lockTry
	}
	if rt.cfg.ClaimStrategy == ClaimWithStatement && in.lock == lockTry {
		rt.runAtomicWithStatement(x, key, fp, fn, &in)
		return
	}
	strategy := rt.cfg.ClaimStrategy
	if strategy == ClaimWithStatement {
		strategy = ClaimReadFirst
	}
	rt.runAtomicClaimed(x, key, fp, fn, &in, strategy)
}

// runAtomicClaimed claims the key before the handler starts (ClaimReadFirst, ClaimPipelined, and
// the claims that may wait: Operation.Wait, NoAdvisoryLocks), then runs it.
func (rt *Runtime) runAtomicClaimed(x *Exchange, key string, fp canonical.Fingerprint, fn AtomicFunc, in *claimInput, strategy ClaimStrategy) {
	op := x.op
	ctx := x.r.Context()
	in.token = randomToken()
	start := time.Now()
	claimCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout+in.lockTimeout)
	c, err := rt.store.claimAtomic(claimCtx, in, strategy)
	cancel()
	rt.obs.ClaimLatency(op.ID, Atomic, time.Since(start))
	switch {
	case errors.Is(err, errInFlight):
		rt.conflict(x, 0)
		return
	case err != nil:
		rt.storeUnavailable(x, key, err)
		return
	case c.conn == nil:
		rt.answerExisting(x, &c.rec, fp, key)
		return
	}

	conn := c.conn
	defer rt.store.discard(conn)
	resp, err := callAtomic(ctx, fn, &managedTx{conn: conn.Conn()})
	if err != nil {
		rt.store.rollback(conn)
		rt.handlerFailed(x, key, err)
		return
	}
	rt.completeAtomic(x, key, fp, conn, in, resp, nil)
}

// completeAtomic finishes an atomic-mode request whose handler answered resp: a non-final
// status rolls back and releases the key; a final one is stored with the handler's writes and
// committed in one round trip, even if the client has gone away meanwhile. claimNow, when set,
// takes the claim first (a ClaimWithStatement handler that sent no statement) and reports false
// when it answered the request itself.
func (rt *Runtime) completeAtomic(x *Exchange, key string, fp canonical.Fingerprint, conn *pgxpool.Conn, in *claimInput, resp Response, claimNow func(context.Context) bool) {
	op := x.op
	if !isFinal(op, resp.Status) {
		rt.store.rollback(conn)
		rt.obs.Outcome(op.ID, Atomic, OutcomeReleased)
		writeResponse(x.w, resp)
		return
	}
	st, err := prepareStored(op, resp)
	if err != nil {
		rt.store.rollback(conn)
		rt.handlerFailed(x, key, err)
		return
	}
	if conn.Conn().PgConn().TxStatus() == 'E' {
		// A statement failed and the handler went on to answer: its writes are gone with the
		// failed transaction, so its answer must not be stored or sent as a success.
		rt.store.rollback(conn)
		rt.handlerFailed(x, key, errTxFailed)
		return
	}
	doneCtx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), rt.cfg.StoreTimeout)
	defer cancel()
	if claimNow != nil && !claimNow(doneCtx) {
		return
	}
	if err := rt.store.completeAndCommit(doneCtx, conn, in, in.token, &st); err != nil {
		rt.store.rollback(conn)
		if errors.Is(err, errRecordLost) {
			if in.deferred && rt.answerIfCompleted(x, conn, in, fp, key) {
				return
			}
			rt.handlerFailed(x, key, err)
			return
		}
		// The commit's fate may be unknown (connection lost): 503 tells the client to retry, and
		// the retry replays if it committed, or runs once more if it did not.
		rt.storeUnavailable(x, key, err)
		return
	}
	rt.obs.Outcome(op.ID, Atomic, OutcomeExecuted)
	writeResponse(x.w, resp)
}

// runAtomicWithStatement is runAtomic under ClaimWithStatement (pending.go): the read, then the
// handler, whose first statement carries BEGIN and the claim lock, then the completed record
// with the COMMIT.
func (rt *Runtime) runAtomicWithStatement(x *Exchange, key string, fp canonical.Fingerprint, fn AtomicFunc, in *claimInput) {
	op := x.op
	ctx := x.r.Context()
	start := time.Now()
	readCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout)
	conn, rec, found, err := rt.store.readForClaim(readCtx, in)
	cancel()
	rt.obs.ClaimLatency(op.ID, Atomic, time.Since(start))
	switch {
	case err != nil:
		rt.storeUnavailable(x, key, err)
		return
	case found && rec.live:
		rt.answerExisting(x, &rec, fp, key)
		return
	case found: // expired: the eager claim reuses its row (DESIGN section 4, retention)
		rt.runAtomicClaimed(x, key, fp, fn, in, ClaimReadFirst)
		return
	}
	defer rt.store.discard(conn)
	// A new key: the record is inserted, completed, by completeAndCommit, under a claim id drawn
	// only now (a replay needs none).
	in.deferred, in.token = true, randomToken()

	hctx, cancelHandler := context.WithCancelCause(ctx)
	defer cancelHandler(nil)
	block := &pendingBlock{s: rt.store, conn: conn, claim: in}
	block.armTimer(hctx, rt.cfg.ClaimDelay, cancelHandler)
	resp, err := callAtomic(hctx, fn, &managedTx{conn: conn.Conn(), block: block})
	state := block.settle()
	switch {
	case state == blockLost:
		rt.store.rollback(conn)
		rt.claimLost(x, key, fp, block)
		return
	case err != nil:
		rt.store.rollback(conn)
		if state == blockOpen && !block.rechecked && rt.answerIfCompleted(x, conn, in, fp, key) {
			return
		}
		rt.handlerFailed(x, key, err)
		return
	}
	var claimNow func(context.Context) bool
	if state == blockPending && isFinal(op, resp.Status) {
		// The handler sent no statement and its answer is final: the claim goes alone now.
		claimNow = func(ctx context.Context) bool {
			if err := block.open(ctx); err != nil {
				rt.store.rollback(conn)
				rt.claimLost(x, key, fp, block)
				return false
			}
			return true
		}
	}
	rt.completeAtomic(x, key, fp, conn, in, resp, claimNow)
}

// answerIfCompleted answers from the key's record when a concurrent request completed the key
// between our read and our claim lock: the claim that went with the handler's statement does
// not re-read, so that rare race surfaces later, as the record INSERT's unique_violation or as
// a handler error (a business row that the other request wrote). Our transaction has been
// rolled back; the request is then answered as if it had arrived after the other one.
func (rt *Runtime) answerIfCompleted(x *Exchange, conn *pgxpool.Conn, in *claimInput, fp canonical.Fingerprint, key string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), rt.cfg.StoreTimeout)
	defer cancel()
	rec, found, err := rt.store.read(ctx, conn.Conn(), in.scope, in.key)
	if err != nil || !found || !rec.live {
		return false
	}
	rt.answerExisting(x, &rec, fp, key)
	return true
}

// claimLost answers a request whose pending claim failed.
func (rt *Runtime) claimLost(x *Exchange, key string, fp canonical.Fingerprint, block *pendingBlock) {
	switch {
	case errors.Is(block.err, errClaimBusy) || isLockTimeout(block.err):
		rt.conflict(x, 0)
	case errors.Is(block.err, errClaimSuperseded) && block.rec.live:
		rt.answerExisting(x, &block.rec, fp, key)
	case errors.Is(block.err, errClaimSuperseded):
		// Completed and already expired between our read and our lock (a retention of
		// milliseconds): the key is free again; the client's retry claims it.
		rt.conflict(x, 0)
	case errors.Is(block.err, errStatementNotSent):
		rt.handlerFailed(x, key, block.err)
	default:
		rt.storeUnavailable(x, key, block.err)
	}
}

// runUnguardedAtomic runs fn for a request whose optional key is absent (key.required: false):
// no record, the handler's writes commit when its response is final. BEGIN travels with the
// handler's first statement (pending.go); a handler that sends none commits nothing.
func (rt *Runtime) runUnguardedAtomic(x *Exchange, fn AtomicFunc) {
	ctx := x.r.Context()
	acqCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout)
	conn, err := rt.store.pool.Acquire(acqCtx)
	cancel()
	if err != nil {
		rt.storeUnavailable(x, "", err)
		return
	}
	defer rt.store.discard(conn)
	block := &pendingBlock{s: rt.store, conn: conn}
	resp, err := callAtomic(ctx, fn, &managedTx{conn: conn.Conn(), block: block})
	state := block.settle()
	switch {
	case state == blockLost:
		rt.store.rollback(conn)
		rt.storeUnavailable(x, "", block.err)
		return
	case err != nil:
		rt.store.rollback(conn)
		rt.handlerFailed(x, "", err)
		return
	case !isFinal(x.op, resp.Status):
		rt.store.rollback(conn)
		rt.obs.Outcome(x.op.ID, Atomic, OutcomeUnguarded)
		writeResponse(x.w, resp)
		return
	}
	if state == blockOpen {
		if conn.Conn().PgConn().TxStatus() == 'E' {
			rt.store.rollback(conn)
			rt.handlerFailed(x, "", errTxFailed)
			return
		}
		doneCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.cfg.StoreTimeout)
		defer cancel()
		ct, err := conn.Exec(doneCtx, "COMMIT")
		if err == nil && ct.String() != "COMMIT" {
			err = fmt.Errorf("commit: the transaction rolled back (%s)", ct.String())
		}
		if err != nil {
			rt.storeUnavailable(x, "", err)
			return
		}
	}
	rt.obs.Outcome(x.op.ID, Atomic, OutcomeUnguarded)
	writeResponse(x.w, resp)
}

// callAtomic runs fn, turning a panic into an error so the transaction is rolled back and the
// client gets a 500 problem rather than a dropped connection.
func callAtomic(ctx context.Context, fn AtomicFunc, tx pgx.Tx) (resp Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	resp, err = fn(ctx, tx)
	if err == nil && (resp.Status < 100 || resp.Status > 999) && resp.Status != 0 {
		err = fmt.Errorf("handler answered status %d", resp.Status)
	}
	if resp.Status == 0 && err == nil {
		resp.Status = http.StatusOK
	}
	return resp, err
}

func retentionOf(op *Operation) time.Duration {
	if op.Retention <= 0 {
		return 24 * time.Hour
	}
	return op.Retention
}

// atomicClaim is the result of claimAtomic: either conn (claimed; its transaction block is open
// and holds the running record) or rec (the key's live record, which this request did not claim).
type atomicClaim struct {
	conn *pgxpool.Conn
	rec  record
}

// claimAtomic claims in.key for an atomic-mode request, or returns its live record. It returns
// errInFlight when a concurrent claim holds the key beyond in.lockTimeout, and any other error
// when the store cannot be used.
func (s *store) claimAtomic(ctx context.Context, in *claimInput, strategy ClaimStrategy) (atomicClaim, error) {
	for range maxClaimAttempts {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return atomicClaim{}, fmt.Errorf("acquire: %w", err)
		}
		claimed, rec, found, err := s.tryAtomic(ctx, conn, in, strategy)
		if err != nil {
			s.discard(conn)
			if errors.Is(err, errClaimBusy) || isLockTimeout(err) {
				return atomicClaim{}, errInFlight
			}
			return atomicClaim{}, err
		}
		if claimed {
			return atomicClaim{conn: conn}, nil
		}
		if found && rec.live {
			s.discard(conn)
			return atomicClaim{rec: rec}, nil
		}
		if found { // expired: the key is new again (DESIGN section 4, retention)
			took, err := s.takeExpiredAtomic(ctx, conn, in)
			if err != nil {
				s.discard(conn)
				if errors.Is(err, errClaimBusy) || isLockTimeout(err) {
					return atomicClaim{}, errInFlight
				}
				return atomicClaim{}, err
			}
			if took {
				return atomicClaim{conn: conn}, nil
			}
			s.discard(conn)
			continue
		}
		// Neither our claim nor a record: the conflicting row committed after our snapshot, or
		// its transaction rolled back. A fresh read decides.
		rec, found, err = s.read(ctx, conn.Conn(), in.scope, in.key)
		s.discard(conn)
		if err != nil {
			return atomicClaim{}, err
		}
		if found && rec.live {
			return atomicClaim{rec: rec}, nil
		}
	}
	return atomicClaim{}, errInFlight
}

// tryAtomic makes one claim attempt on conn. claimed means conn's transaction block is open and
// the key is ours: it holds our running record, or, for a read-first claim under the advisory
// lock (in.deferred), the lock alone. Otherwise the block is closed and rec is the record the
// claim saw.
func (s *store) tryAtomic(ctx context.Context, conn *pgxpool.Conn, in *claimInput, strategy ClaimStrategy) (claimed bool, rec record, found bool, err error) {
	in.deferred = false
	if strategy == ClaimReadFirst {
		// A replay, mismatch or running lease ends here, before anything else is built.
		rec, found, err = s.read(ctx, conn.Conn(), in.scope, in.key)
		if err != nil || found {
			return false, rec, found, err
		}
		if in.lock != lockNone {
			return s.lockAtomic(ctx, conn, in)
		}
	}
	timeout := strconv.FormatInt(max(in.lockTimeout.Milliseconds(), 1), 10) + "ms"
	claim := sqlClaimAtomic(in.lock)
	if err := s.prepare(ctx, conn.Conn(), sqlSetLockTimeout, claim, sqlClaimedOrStop, "BEGIN", sqlResetLockTimeout); err != nil {
		return false, rec, false, err
	}
	b := &pgx.Batch{}
	if strategy == ClaimReadFirst {
		b.Queue("BEGIN")
	}
	// One pipeline, one Sync. Pipelined: set_config, claim, stop-unless-claimed, BEGIN (which
	// turns the implicit transaction holding the claim into a block that stays open), and the
	// reset of lock_timeout for the handler. Read-first: the same inside an explicit BEGIN.
	b.Queue(sqlSetLockTimeout, timeout)
	b.Queue(claim, in.atomicArgs()...)
	if strategy != ClaimReadFirst {
		b.Queue(sqlClaimedOrStop, in.scope, in.key, in.token)
		b.Queue("BEGIN")
	}
	b.Queue(sqlResetLockTimeout)
	br := conn.SendBatch(ctx, b)
	if strategy == ClaimReadFirst {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return false, rec, false, err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return false, rec, false, err
	}
	var raw rawRecord
	var token *int64
	var free bool
	if err := br.QueryRow().Scan(append([]any{&token, &free}, raw.targets()...)...); err != nil {
		br.Close()
		return false, rec, false, err
	}
	closeErr := br.Close()
	if !free {
		return false, rec, false, errClaimBusy
	}
	if token != nil {
		if closeErr != nil {
			return false, rec, false, closeErr
		}
		if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
			return false, rec, false, fmt.Errorf("claim: transaction status %q after BEGIN", st)
		}
		return true, rec, false, nil
	}
	if closeErr != nil && !isClaimStop(closeErr) {
		return false, rec, false, closeErr
	}
	if strategy == ClaimReadFirst {
		s.rollback(conn)
	}
	rec, found = raw.record()
	return false, rec, found, nil
}

// lockAtomic is the read-first claim of a key that had no record, under the advisory claim lock:
// it opens a transaction block that holds the lock and writes nothing. The record is inserted
// once, completed, by completeAndCommit (in.deferred), instead of being inserted running here
// and updated there: one row version and its index entries instead of two, and a cheaper claim
// statement (bench/README.md measured both). The lock is what keeps a concurrent claim of the
// key out (409), as in the pipelined claim, whose running row is invisible to others anyway.
//
// The record is read again after the lock is taken, by a statement of its own: under READ
// COMMITTED its snapshot is newer than the lock, so a claim that committed (and released the
// lock) between our first read and our lock is seen, and answered as a replay.
func (s *store) lockAtomic(ctx context.Context, conn *pgxpool.Conn, in *claimInput) (claimed bool, rec record, found bool, err error) {
	lock := sqlLockOnly(in.lock)
	// Only a waiting lock (Operation.Wait) needs lock_timeout: the try-lock and the read never
	// wait, and nothing else in this round trip takes a lock.
	wait := in.lock == lockWait
	if err := s.prepare(ctx, conn.Conn(), "BEGIN", sqlSetLockTimeout, lock, sqlRead, sqlResetLockTimeout); err != nil {
		return false, rec, false, err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if wait {
		b.Queue(sqlSetLockTimeout, strconv.FormatInt(max(in.lockTimeout.Milliseconds(), 1), 10)+"ms")
	}
	b.Queue(lock, claimLockKey(in.scope, in.key))
	b.Queue(sqlRead, in.scope, in.key)
	if wait {
		b.Queue(sqlResetLockTimeout)
	}
	br := conn.SendBatch(ctx, b)
	var (
		free bool
		raw  rawRecord
	)
	_, err = br.Exec()
	if err == nil && wait {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&free)
	}
	if err == nil {
		err = br.QueryRow().Scan(raw.targets()...)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil && wait {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, rec, false, err // the caller discards conn, which rolls back
	}
	if !free {
		return false, rec, false, errClaimBusy
	}
	if rec, found = raw.record(); found {
		s.rollback(conn)
		return false, rec, true, nil
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
		return false, rec, false, fmt.Errorf("claim: transaction status %q after BEGIN", st)
	}
	in.deferred = true
	return true, rec, false, nil
}

// sqlLockOnly takes the claim lock of kind l ($1 is the lock key) and returns whether it is ours.
func sqlLockOnly(l claimLock) string { return lockOnlySQL[l] }

// lockOnlySQL is sqlLockOnly's statement per lock kind, built once.
var lockOnlySQL = [...]string{
	lockTry:  "SELECT " + strings.ReplaceAll(lockTry.expr(), "$9", "$1") + " AS ok",
	lockWait: "SELECT " + strings.ReplaceAll(lockWait.expr(), "$9", "$1") + " AS ok",
	lockNone: "SELECT " + strings.ReplaceAll(lockNone.expr(), "$9", "$1") + " AS ok",
}

// takeExpiredAtomic opens a transaction on conn and reuses the row of an expired record for our
// claim; took is false (and the block closed) when the row is gone or live again.
func (s *store) takeExpiredAtomic(ctx context.Context, conn *pgxpool.Conn, in *claimInput) (took bool, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlSetLockTimeout, strconv.FormatInt(max(in.lockTimeout.Milliseconds(), 1), 10)+"ms")
	b.Queue(sqlTakeExpiredAtomic(in.lock), in.atomicArgs()...)
	b.Queue(sqlResetLockTimeout)
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if !took {
			s.rollback(conn)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return false, err
	}
	if _, err := br.Exec(); err != nil {
		return false, err
	}
	var free bool
	var token *int64
	if err := br.QueryRow().Scan(&free, &token); err != nil {
		return false, err
	}
	if !free {
		return false, errClaimBusy
	}
	if token == nil {
		return false, nil
	}
	if _, err := br.Exec(); err != nil {
		return false, err
	}
	return true, nil
}

// errTxFailed is a handler that answered although one of its statements had failed, which
// aborts the transaction (PostgreSQL ignores every later statement until the block ends).
var errTxFailed = errors.New("a statement failed in the handler's transaction, which PostgreSQL aborted; the handler answered anyway")

// errClaimBusy is a claim whose lock another claimant holds.
var errClaimBusy = errors.New("claim lock held by a concurrent request")

// errRecordLost is a completion whose record was not ours any more: in atomic mode the handler
// changed it; in lease mode the lease was taken over.
var errRecordLost = errors.New("idempotency record lost")

// sqlCompleteOrStop wraps sqlComplete so that when it updates nothing the statement fails and the
// COMMIT pipelined behind it never runs: the handler's writes cannot commit without the record.
const sqlCompleteOrStop = `WITH done AS (` + sqlComplete + ` RETURNING 1)
SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM done) THEN '1'
	ELSE 'idemgen: the record is no longer owned by this request' END AS integer)`

// sqlInsertCompleted stores the completed record of a deferred claim (lockAtomic). A row that
// exists anyway (a claim that did not take the advisory lock: another replica configured with
// NoAdvisoryLocks, or a lease-mode operation given the same key) fails the INSERT with
// unique_violation, so the COMMIT pipelined behind it never runs. $6 claim id, $7 status,
// $8 headers (JSON), $9 body, $10 body omitted, $11 retention (µs).
const sqlInsertCompleted = `INSERT INTO idempotency_records
	(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
	 response_status, response_headers, response_body, body_omitted, created_at, completed_at, expires_at)
VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10, now(), statement_timestamp(),
	statement_timestamp() + $11::bigint * interval '1 microsecond')`

// completeAndCommit stores st under token and commits, in one round trip.
func (s *store) completeAndCommit(ctx context.Context, conn *pgxpool.Conn, in *claimInput, token int64, st *stored) error {
	var headers any
	if st.headers != nil {
		headers = string(st.headers)
	}
	if in.deferred {
		return s.insertAndCommit(ctx, conn, in, headers, st)
	}
	if err := s.prepare(ctx, conn.Conn(), sqlCompleteOrStop, "COMMIT"); err != nil {
		return fmt.Errorf("store response: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(sqlCompleteOrStop, in.scope, in.key, token, int16(st.status), headers, st.body, st.omitted,
		in.retention.Microseconds())
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	var one int
	if err := br.QueryRow().Scan(&one); err != nil {
		br.Close()
		if isClaimStop(err) {
			return errRecordLost
		}
		return fmt.Errorf("store response: %w", err)
	}
	ct, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ct.String() != "COMMIT" {
		return fmt.Errorf("commit: the transaction rolled back (%s)", ct.String())
	}
	return nil
}

// insertAndCommit is completeAndCommit for a deferred claim: the record is inserted completed.
func (s *store) insertAndCommit(ctx context.Context, conn *pgxpool.Conn, in *claimInput, headers any, st *stored) error {
	if err := s.prepare(ctx, conn.Conn(), sqlInsertCompleted, "COMMIT"); err != nil {
		return fmt.Errorf("store response: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(sqlInsertCompleted, in.scope, in.key, in.op, in.fp.Sum[:], int16(in.fp.Version), in.token,
		int16(st.status), headers, st.body, st.omitted, in.retention.Microseconds())
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return errRecordLost
		}
		return fmt.Errorf("store response: %w", err)
	}
	ct, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ct.String() != "COMMIT" {
		return fmt.Errorf("commit: the transaction rolled back (%s)", ct.String())
	}
	return nil
}

// rollback ends conn's transaction block, if any. Failure closes the connection, which makes the
// server roll back.
func (s *store) rollback(conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' || conn.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// discard rolls back whatever conn still has open and returns it to the pool (pgxpool destroys
// connections that are closed or not idle).
func (s *store) discard(conn *pgxpool.Conn) {
	s.rollback(conn)
	conn.Release()
}

// Statements around the claim that set and reset the claim's lock wait. set_config(..., true)
// and SET LOCAL end with the transaction: no session state outlives it.
const (
	sqlSetLockTimeout   = "SELECT set_config('lock_timeout', $1, true)"
	sqlResetLockTimeout = "SET LOCAL lock_timeout TO DEFAULT"
)

// prepare makes sure conn has the statements of a batch that may fail on purpose as named
// prepared statements. pgx drops a batch's statements from its statement cache whenever the
// batch fails, so without this every replay (whose claim pipeline stops with an error) would
// make the connection's next claim prepare its statements again: extra round trips the tracer
// does not show. Named statements are not in that cache; preparing them is a map lookup after
// the first time on a connection. Only the caching exec modes need it (and the simple protocol,
// used behind transaction-pooling proxies, must not get prepared statements): store.prepared,
// read once from the pool's configuration (pgx.Conn.Config copies the whole configuration on
// every call, which showed in the allocation profile of every request).
func (s *store) prepare(ctx context.Context, conn *pgx.Conn, sqls ...string) error {
	if !s.prepared {
		return nil
	}
	for _, q := range sqls {
		if _, err := conn.Prepare(ctx, q, q); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}
