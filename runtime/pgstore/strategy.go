package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// ClaimStrategy is how an atomic-mode claim is built into database round trips. All three answer
// a replay, a mismatch and a conflict in one round trip; they differ in what that round trip
// costs the database and in the round trips of a new key (docs/runtime.md and bench/README.md
// have the measurements). The implementations are ClaimWithStatement, ClaimReadFirst and
// ClaimPipelined; the interface is closed.
type ClaimStrategy interface {
	// beginAtomic claims sp's key, or returns its live record (exactly one of the two).
	beginAtomic(ctx context.Context, s *Store, sp *claimSpec) (*tx, *store.Record, error)
}

// ClaimWithStatement (the default) reads the record with a plain SELECT first: a replay,
// mismatch or running lease is answered from that one cheap read (no transaction id, no error).
// For a new key, BEGIN and the advisory claim lock are queued in front of the handler's first
// statement and travel in its round trip, and the record is inserted, completed, with the
// COMMIT: the handler's statements plus two round trips, as many as the same handler in a plain
// pgx BEGIN/…/COMMIT.
//
// If the handler sends no statement within Delay, the claim goes out alone then, so a
// concurrent duplicate still gets 409 while the handler works; a duplicate that arrives within
// that delay may run the handler's code up to its first statement (never a statement), and is
// then answered 409 or replayed. Atomic-mode handlers keep their effects in the database.
//
// Claims that may wait (Claim.Wait) and stores without advisory locks claim before the handler
// starts, as ClaimReadFirst does.
type ClaimWithStatement struct {
	// Delay is how long the claim waits for the handler's first statement before it is sent
	// alone; default 10ms. It bounds the time during which a concurrent duplicate cannot see
	// that the key is taken.
	Delay time.Duration
	// LockAtRead makes the read of a new key take its advisory claim lock too, for the
	// database session, in the same round trip: a new key comes back claimed, so the handler
	// starts only once the key is ours (no duplicate runs any of its code, Delay has no use, and
	// the Middleware, which must confirm the claim before the opaque handler starts, needs no
	// round trip of its own for it). BEGIN travels with the handler's first statement, and the
	// record INSERT, COMMIT and the lock's release with the last round trip: the handler's
	// statements plus two round trips, as without it. A replay, mismatch or conflict still
	// costs one read that takes no lock and no transaction id: one statement, as without it,
	// on a schema that has idempotency_key_taken (schema version 6, which re-reads a new key
	// under its lock within the read), two on an older one. Every other end (Abort, a failed
	// commit) releases the lock in the same round trip as its ROLLBACK; a connection whose
	// release failed is closed, never returned to the pool holding it. Under a records cap
	// (Limits.Records) the same read counts the new key; one the cap refuses gives the lock
	// back in a round trip of its own. Not behind a proxy that pools transactions (PgBouncer's
	// pool_mode=transaction): a session lock spans the read and the transaction, which such a
	// proxy may run on two server sessions.
	LockAtRead bool
}

// ClaimReadFirst reads the record first, then takes the advisory claim lock in a round trip of
// its own before the handler starts: the handler's statements plus three round trips. Use it
// when a handler does slow work before its first statement and no duplicate may start that work
// at all.
type ClaimReadFirst struct{}

// ClaimPipelined sends the claim and the transaction's BEGIN in one pipeline whose middle
// statement fails on purpose when the key already exists, so a new key costs two round trips
// plus the handler's statements, but it inserts its record running and updates it at
// completion. A replay also costs one round trip, a dearer one: the claim statement, an aborted
// implicit transaction and one ERROR line ("idemgen: ... not an error") in the PostgreSQL server
// log for every replay, mismatch and conflict. It remains for databases far from the
// application, where a round trip costs more than that work.
type ClaimPipelined struct{}

func (c ClaimWithStatement) beginAtomic(ctx context.Context, s *Store, sp *claimSpec) (*tx, *store.Record, error) {
	if sp.lock != lockTry || sp.Wait > 0 {
		// A claim that may wait should replay without running anything: claim first.
		return ClaimReadFirst{}.beginAtomic(ctx, s, sp)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire: %w", err)
	}
	if c.LockAtRead {
		return c.beginLocked(ctx, s, sp, conn)
	}
	var (
		r    *row
		busy bool
	)
	if s.lim.records > 0 && !sp.Counted {
		r, busy, err = s.readLimited(ctx, conn.Conn(), sp, true)
	} else {
		r, busy, err = s.readProbe(ctx, conn.Conn(), sp.d, sp.Operation)
	}
	switch {
	case err != nil:
		conn.Release()
		return nil, nil, err
	case busy:
		conn.Release()
		return nil, nil, store.ErrBusy
	case r != nil && r.live:
		conn.Release()
		return nil, &r.rec, nil
	case r != nil: // expired: its row is taken over under the lock, before the handler
		conn.Release()
		return ClaimReadFirst{}.beginAtomic(ctx, s, sp)
	}
	// A new key. A duplicate in this Store that read it new too is answered now, holding
	// nothing more (inflight.go).
	if !s.claiming.enter(sp.d.key.Bytes) {
		conn.Release()
		return nil, nil, store.ErrBusy
	}
	// The connection is held while the handler runs, so it needs a handler slot
	// (Options.ReservedConns). If it waits for one on another connection, the read may be
	// stale: the claim's lock and the record's INSERT at Commit catch what changed meanwhile.
	if conn, err = s.slotFor(ctx, conn, sp.tenant); err != nil {
		s.claiming.leave(sp.d.key.Bytes)
		return nil, nil, err
	}
	delay := c.Delay
	if delay <= 0 {
		delay = 10 * time.Millisecond
	}
	// The claim id is drawn only now (a replay needs none), and the record is inserted,
	// completed, at Commit.
	p := &pendingBlock{s: s, conn: conn, claim: sp, delay: delay}
	t := newTx(s, conn, sp, randomToken(), commitInsert, p)
	t.slot, t.entered = true, true
	return t, nil, nil
}

// beginLocked is beginAtomic with LockAtRead: the read takes the claim lock of a new key for
// the session on conn (Store.readLock), and the transaction releases it when it ends.
func (c ClaimWithStatement) beginLocked(ctx context.Context, s *Store, sp *claimSpec, conn *pgxpool.Conn) (*tx, *store.Record, error) {
	r, busy, locked, taken, err := s.readLock(ctx, conn, sp)
	switch {
	case err != nil && isLimitError(err):
		// The tenant's records cap refused the new key: the lock goes back with the answer.
		if locked {
			s.unlock(conn, sp.d.lock)
		}
		conn.Release()
		return nil, nil, err
	case err != nil:
		// The lock may have been taken before the failure: the connection is closed, which
		// releases it. A claim lock held past ConflictTimeout is a concurrent claim's.
		closeConn(conn)
		conn.Release()
		if isLockTimeout(err) {
			return nil, nil, store.ErrBusy
		}
		return nil, nil, err
	case busy:
		conn.Release()
		return nil, nil, store.ErrBusy
	case locked && !taken && !s.claiming.enter(sp.d.key.Bytes):
		// Another request of this Store has the key (a claim of it that just ended and has
		// not left yet): busy.
		s.unlock(conn, sp.d.lock)
		conn.Release()
		return nil, nil, store.ErrBusy
	case locked && (taken || !s.trySlot(sp.tenant)):
		if !taken {
			s.claiming.leave(sp.d.key.Bytes)
		}
		// A claim completed between the read's snapshot and our lock, or every connection a
		// handler may hold is taken: give the lock back (unlock closes conn when it cannot)
		// and decide as ClaimReadFirst does.
		s.unlock(conn, sp.d.lock)
		conn.Release()
		if r != nil && r.live {
			return nil, &r.rec, nil
		}
		return ClaimReadFirst{}.beginAtomic(ctx, s, sp)
	case r != nil && r.live:
		conn.Release()
		return nil, &r.rec, nil
	case r != nil: // expired: its row is taken over under the lock, before the handler
		conn.Release()
		return ClaimReadFirst{}.beginAtomic(ctx, s, sp)
	}
	// A new key, locked by us and re-read under the lock: the block carries only BEGIN.
	p := &pendingBlock{s: s, conn: conn, held: true}
	t := newTx(s, conn, sp, randomToken(), commitInsert, p)
	t.slot, t.held, t.rechecked, t.entered = true, true, true, true
	return t, nil, nil
}

// isLimitError reports whether err is a tenant's cap refusing the claim (store.LimitError). A
// function of its own so that the target errors.As needs is allocated only when there is an
// error, not on every read.
func isLimitError(err error) bool {
	var over *store.LimitError
	return errors.As(err, &over)
}

func (ClaimReadFirst) beginAtomic(ctx context.Context, s *Store, sp *claimSpec) (*tx, *store.Record, error) {
	return s.claimBefore(ctx, sp, func(ctx context.Context, conn *pgxpool.Conn, token int64, held *bool) (attempt, error) {
		// A replay, mismatch or running lease ends here, before anything else is built; with a
		// try-lock, so does a duplicate of a key whose claim is held.
		var r *row
		var err error
		switch {
		case s.lim.records > 0 && !sp.Counted:
			var busy bool
			if r, busy, err = s.readLimited(ctx, conn.Conn(), sp, sp.lock == lockTry); err == nil && busy {
				return attempt{}, store.ErrBusy
			}
		case sp.lock == lockTry:
			var busy bool
			if r, busy, err = s.readProbe(ctx, conn.Conn(), sp.d, sp.Operation); err == nil && busy {
				return attempt{}, store.ErrBusy
			}
		default:
			r, err = s.read(ctx, conn.Conn(), sp.d, sp.Operation)
		}
		if err != nil || r != nil {
			return attempt{row: r}, err
		}
		if !*held {
			if !s.trySlot(sp.tenant) {
				return attempt{needSlot: true}, nil
			}
			*held = true
		}
		if sp.lock == lockNone {
			return s.claimRow(ctx, conn, sp, token, true)
		}
		r, err = s.lockAndRead(ctx, conn, sp)
		if err != nil || r != nil {
			return attempt{row: r}, err
		}
		return attempt{claimed: commitInsert, rechecked: true}, nil
	})
}

func (ClaimPipelined) beginAtomic(ctx context.Context, s *Store, sp *claimSpec) (*tx, *store.Record, error) {
	// Never under a records cap (New makes such a store claim as ClaimReadFirst).
	return s.claimBefore(ctx, sp, func(ctx context.Context, conn *pgxpool.Conn, token int64, held *bool) (attempt, error) {
		a, err := s.claimRow(ctx, conn, sp, token, false)
		if err == nil && a.claimed != 0 && !*held {
			if !s.trySlot(sp.tenant) {
				// Claimed, but every connection a handler may hold is taken: give the claim
				// back and wait for one.
				s.rollback(conn)
				return attempt{needSlot: true}, nil
			}
			*held = true
		}
		return a, err
	})
}

// attempt is one claim attempt's result: claimed (the transaction block on the connection is
// open and the key is ours, to be completed as claimed says), or the record it met (row), or
// neither (the conflicting row committed after our snapshot, or rolled back), or needSlot: the
// key is new but no handler slot is free (Options.ReservedConns).
type attempt struct {
	claimed   commitKind
	rechecked bool
	row       *row
	needSlot  bool
}

// claimBefore runs a claim that is complete before the handler starts: attempts of try on a
// fresh connection each, until one claims or meets a live record. An expired record's row is
// taken over under the claim lock. A handler slot is taken (held) once the key turns out to be
// new; when none is free, the attempt gives its connection back and waits for one first.
func (s *Store) claimBefore(ctx context.Context, sp *claimSpec, try func(ctx context.Context, conn *pgxpool.Conn, token int64, held *bool) (attempt, error)) (*tx, *store.Record, error) {
	held := false
	defer func() {
		if held {
			s.freeSlot(sp.tenant)
		}
	}()
	for attempts := 0; attempts < maxClaimAttempts; {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("acquire: %w", err)
		}
		token := randomToken()
		a, err := try(ctx, conn, token, &held)
		if err == nil && a.claimed == 0 && a.row != nil && !a.row.live && !held {
			// Expired: the key is new again, in the same row, which needs a handler slot.
			if held = s.trySlot(sp.tenant); !held {
				a = attempt{needSlot: true}
			}
		}
		if err == nil && a.needSlot {
			s.discard(conn)
			if err := s.waitSlot(ctx, sp.tenant); err != nil {
				return nil, nil, err
			}
			held = true
			continue
		}
		attempts++
		if err == nil && a.claimed == 0 && a.row != nil && !a.row.live {
			if err = s.takeExpired(ctx, conn, sp, token); err == nil {
				a = attempt{claimed: commitUpdate, rechecked: true}
			} else if errors.Is(err, errGone) {
				s.discard(conn)
				continue
			}
		}
		switch {
		case err != nil:
			s.discard(conn)
			if errors.Is(err, store.ErrBusy) || isLockTimeout(err) {
				return nil, nil, store.ErrBusy
			}
			return nil, nil, err
		case a.claimed != 0:
			t := newTx(s, conn, sp, token, a.claimed, nil)
			t.rechecked, t.slot = a.rechecked, held
			held = false // the transaction gives it back
			return t, nil, nil
		case a.row != nil:
			s.discard(conn)
			return nil, &a.row.rec, nil
		}
		// Neither our claim nor a record: a fresh read decides.
		r, err := s.read(ctx, conn.Conn(), sp.d, sp.Operation)
		s.discard(conn)
		if err != nil {
			return nil, nil, err
		}
		if r != nil && r.live {
			return nil, &r.rec, nil
		}
	}
	return nil, nil, store.ErrBusy
}

// errGone is an expired row that was gone (swept, or taken by another claim) when we came to
// take it over.
var errGone = errors.New("the expired record is gone")

// lockAndRead opens a transaction block on conn that takes the claim lock and reads the record
// again, in one round trip; the block stays open, holding the lock, when the key is ours. It
// returns store.ErrBusy when a concurrent claim holds the lock, and the row it met otherwise
// (the block is then rolled back). The record is inserted once, completed, at Commit, instead
// of being inserted running here and updated there: one row version and its index entries
// instead of two (bench/README.md measured both).
//
// The re-read is a statement of its own: under READ COMMITTED its snapshot is newer than the
// lock, so a claim that committed (and released the lock) between our first read and our lock
// is seen, and answered as a replay.
func (s *Store) lockAndRead(ctx context.Context, conn *pgxpool.Conn, sp *claimSpec) (*row, error) {
	lock := s.q.lockOnly[sp.lock]
	// The try-lock and the read never wait: no lock_timeout to set.
	check := s.checks(conn.Conn())
	if err := s.prepare(ctx, conn.Conn(), "BEGIN", lock, s.q.read, sqlSetCheckInterval); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if check {
		b.Queue(sqlSetCheckInterval, s.checkInterval)
	}
	b.Queue(lock, s.lockArgs(sp.d)...)
	b.Queue(s.q.read, sp.d.scope, sp.d.key)
	br := conn.SendBatch(ctx, b)
	var (
		free bool
		raw  rawRecord
	)
	_, err := br.Exec()
	if err == nil && check {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&free)
	}
	if err == nil {
		err = br.QueryRow().Scan(raw.targetsRead()...)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err // the caller discards conn, which rolls back
	}
	if !free {
		return nil, store.ErrBusy
	}
	if r := raw.row(); r != nil {
		s.rollback(conn)
		return r, nil
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
		return nil, fmt.Errorf("claim: transaction status %q after BEGIN", st)
	}
	return nil, nil
}

// claimRow is the claim that inserts a running row (ClaimPipelined, and claims without advisory
// locks), in one pipeline with one Sync. Pipelined (explicitBegin false): set_config, the claim,
// stop-unless-claimed, BEGIN (which turns the implicit transaction holding the claim into a
// block that stays open), and the reset of lock_timeout for the handler. With explicitBegin:
// the same inside an explicit BEGIN, without the stop.
func (s *Store) claimRow(ctx context.Context, conn *pgxpool.Conn, sp *claimSpec, token int64, explicitBegin bool) (attempt, error) {
	claim := s.q.claimAtomic[sp.lock]
	wait, _ := s.lockWait(sp.lockTimeout)
	if err := s.prepare(ctx, conn.Conn(), append(wait, claim, s.q.claimedOrStop, "BEGIN", sqlResetLockTimeout, sqlSetCheckInterval)...); err != nil {
		return attempt{}, err
	}
	b := &pgx.Batch{}
	if explicitBegin {
		b.Queue("BEGIN")
	}
	waits := s.queueLockWait(b, sp.lockTimeout)
	b.Queue(claim, atomicClaimArgs(sp, token)...)
	if !explicitBegin {
		b.Queue(s.q.claimedOrStop, sp.d.scope, sp.d.key, token)
		b.Queue("BEGIN")
	}
	b.Queue(sqlResetLockTimeout)
	if s.checks(conn.Conn()) {
		b.Queue(sqlSetCheckInterval, s.checkInterval)
	}
	br := conn.SendBatch(ctx, b)
	if explicitBegin {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return attempt{}, err
		}
	}
	for range waits {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return attempt{}, err
		}
	}
	var (
		raw     rawRecord
		claimed *int64
		free    bool
	)
	if err := br.QueryRow().Scan(append([]any{&claimed, &free}, raw.targetsTomb()...)...); err != nil {
		br.Close()
		return attempt{}, err
	}
	closeErr := br.Close()
	if !free {
		return attempt{}, store.ErrBusy
	}
	if claimed != nil {
		if closeErr != nil {
			return attempt{}, closeErr
		}
		if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
			return attempt{}, fmt.Errorf("claim: transaction status %q after BEGIN", st)
		}
		return attempt{claimed: commitUpdate, rechecked: true}, nil
	}
	if closeErr != nil && !isStop(closeErr) {
		return attempt{}, closeErr
	}
	if explicitBegin {
		s.rollback(conn)
	}
	return attempt{row: raw.row()}, nil
}

// takeExpired opens a transaction on conn and reuses the row of an expired record for our
// claim, under the claim lock. errGone (and the block closed) when the row is gone or live
// again; store.ErrBusy when a concurrent claim holds the lock.
func (s *Store) takeExpired(ctx context.Context, conn *pgxpool.Conn, sp *claimSpec, token int64) (err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	waits := s.queueLockWait(b, sp.lockTimeout)
	b.Queue(s.q.takeExpiredAtomic[sp.lock], atomicClaimArgs(sp, token)...)
	b.Queue(sqlResetLockTimeout)
	if s.checks(conn.Conn()) {
		b.Queue(sqlSetCheckInterval, s.checkInterval)
	}
	br := conn.SendBatch(ctx, b)
	took := false
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if !took {
			s.rollback(conn)
		}
	}()
	for range 1 + waits { // BEGIN and the lock wait
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	var free bool
	var next *int64
	if err := br.QueryRow().Scan(&free, &next); err != nil {
		return err
	}
	if !free {
		return store.ErrBusy
	}
	if next == nil {
		return errGone
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	took = true
	return nil
}

// lockWait returns the statements that set a claim's lock wait d for its transaction, and
// their arguments. On PostgreSQL, set_config(..., true). On Citus, where the waits happen on the
// workers: citus.propagate_set_commands = 'local' for the transaction, then SET LOCAL, which
// Citus sends to the transaction's workers, those it has and those it opens later (it takes no
// parameter: d, a duration of ours, is written into it). sqlResetLockTimeout, a SET LOCAL too,
// is propagated the same way.
func (s *Store) lockWait(d time.Duration) (sqls []string, args [][]any) {
	if !s.eng.citus {
		return []string{sqlSetLockTimeout}, [][]any{{lockTimeout(d)}}
	}
	return []string{sqlPropagateSetLocal, "SET LOCAL lock_timeout TO '" + lockTimeout(d) + "'"}, [][]any{nil, nil}
}

// queueLockWait queues lockWait's statements; it returns how many.
func (s *Store) queueLockWait(b *pgx.Batch, d time.Duration) int {
	sqls, args := s.lockWait(d)
	for i, q := range sqls {
		b.Queue(q, args[i]...)
	}
	return len(sqls)
}

// lockArgs are the arguments of statements.lockOnly and lockOrStop: the lock key, and on Citus
// the record's digests, which route the statement to the worker holding its shard.
func (s *Store) lockArgs(d recordDigest) []any {
	if s.eng.citus {
		return []any{d.lock, d.scope, d.key}
	}
	return []any{d.lock}
}

// lockTimeout formats d as a lock_timeout setting in whole milliseconds (at least 1).
func lockTimeout(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}
