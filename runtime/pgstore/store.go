// Package pgstore is the PostgreSQL idempotency store (pgx/v5): the records, every statement
// that reads or writes them, the three atomic-mode claim strategies, the transaction a handler
// writes through (DBTX), the schema's migrations and the sweeper that deletes expired records.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err := pgstore.Migrate(ctx, pool); err != nil { ... } // every start, every replica
//	st := pgstore.New(pool, pgstore.Options{})
//	rt, err := runtime.New(runtime.Config{Store: st, Scope: tenantOf})
//	go (&pgstore.Sweeper{Pool: pool}).Run(ctx)
//
// It implements store.Store (lease mode) and store.Transactional[DBTX] (atomic mode, and the
// completion phase of lease mode). Every lease and expiry decision uses the database clock
// (now()), never the application's. docs/runtime.md describes the statements and the round
// trips of each path.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// Options configures a Store. Zero values take the defaults stated on each field.
type Options struct {
	// Claim is how atomic-mode claims are built into round trips: ClaimWithStatement (the
	// default), ClaimReadFirst or ClaimPipelined.
	Claim ClaimStrategy
	// NoAdvisoryLocks turns off the transaction-scoped advisory lock by which an atomic-mode
	// claim detects a concurrent claim of the same key without waiting. Set it on engines
	// without pg_try_advisory_xact_lock, or where advisory locks are not cluster-wide
	// (docs/distributed.md); a duplicate then waits up to ConflictTimeout on the uncommitted row.
	NoAdvisoryLocks bool
	// ConflictTimeout is the atomic-mode claim's lock_timeout. With advisory locks it only
	// bounds waits that are not another claim of the key (relation extension under load);
	// default 1s. With NoAdvisoryLocks it is also how long a duplicate waits for a running claim
	// before ErrBusy; default 50ms. A claim's own Wait, when longer, replaces it.
	ConflictTimeout time.Duration
}

// Store is the PostgreSQL store over one pool. It is safe for concurrent use and holds no state
// besides the pool and its options.
type Store struct {
	pool     *pgxpool.Pool
	opts     Options
	strategy ClaimStrategy
	// prepared: the pool's connections cache statements (pgx's caching exec modes), so the
	// statements of batches that may fail on purpose are prepared by name (see prepare).
	prepared bool
}

var _ store.Transactional[DBTX] = (*Store)(nil)

// New returns the store of the idempotency_records table on pool (see Migrate).
func New(pool *pgxpool.Pool, opts Options) *Store {
	if opts.ConflictTimeout <= 0 {
		opts.ConflictTimeout = time.Second
		if opts.NoAdvisoryLocks {
			opts.ConflictTimeout = 50 * time.Millisecond
		}
	}
	s := &Store{pool: pool, opts: opts, strategy: opts.Claim}
	if s.strategy == nil {
		s.strategy = ClaimWithStatement{}
	}
	switch pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		s.prepared = true
	}
	return s
}

// Pool returns the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// maxClaimAttempts bounds the claim loops: each extra attempt follows a race that the database
// resolved under us (a conflicting claim rolled back, a row swept or taken over).
const maxClaimAttempts = 4

// Get returns the key's live record: one plain SELECT, no lock, no transaction id.
func (s *Store) Get(ctx context.Context, id store.ID) (store.Record, bool, error) {
	r, err := s.read(ctx, s.pool, id)
	if err != nil || r == nil || !r.live {
		return store.Record{}, false, err
	}
	return r.rec, true, nil
}

// Reserve claims a key for lease mode with autocommitted statements (one round trip for a new
// key or a live record). A key whose record expired is claimed in its row with the next token.
func (s *Store) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	for range maxClaimAttempts {
		var raw rawRecord
		var token *int64
		err := s.pool.QueryRow(ctx, sqlReserve, claimArgs(&c, int64(1))...).
			Scan(append([]any{&token}, raw.targets()...)...)
		if err != nil {
			return store.Reservation{}, fmt.Errorf("reserve: %w", err)
		}
		if token != nil {
			return store.Reservation{Token: *token}, nil
		}
		r := raw.row()
		if r == nil {
			// The conflicting row committed after our snapshot, or rolled back: look again.
			if r, err = s.read(ctx, s.pool, c.ID); err != nil {
				return store.Reservation{}, err
			}
			if r == nil {
				continue
			}
		}
		if r.live {
			return store.Reservation{Record: r.rec}, nil
		}
		var next int64
		switch err := s.pool.QueryRow(ctx, sqlTakeExpired, claimArgs(&c, nil)...).Scan(&next); {
		case errors.Is(err, pgx.ErrNoRows):
			continue // someone else moved first
		case err != nil:
			return store.Reservation{}, fmt.Errorf("reserve expired record: %w", err)
		}
		return store.Reservation{Token: next}, nil
	}
	return store.Reservation{}, store.ErrBusy
}

// TakeOver moves a running record whose lease ended from token old to the next token.
func (s *Store) TakeOver(ctx context.Context, c store.Claim, old int64) (int64, error) {
	var next int64
	err := s.pool.QueryRow(ctx, sqlTakeOverLease, c.ID.Scope, c.ID.Key, old, c.Lease.Microseconds()).Scan(&next)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, store.ErrLost
	case err != nil:
		return 0, fmt.Errorf("take over: %w", err)
	}
	return next, nil
}

// Extend moves the running record's lease end to d after the database's now().
func (s *Store) Extend(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	ct, err := s.pool.Exec(ctx, sqlExtendLease, id.Scope, id.Key, token, d.Microseconds())
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	if ct.RowsAffected() == 0 {
		return store.ErrLost
	}
	return nil
}

// Complete stores resp under token in an autocommitted statement, for completions that write
// nothing else (lease mode without a CompleteFunc transaction).
func (s *Store) Complete(ctx context.Context, id store.ID, token int64, resp store.Response, retention time.Duration) error {
	ct, err := s.pool.Exec(ctx, sqlComplete, append([]any{id.Scope, id.Key, token}, responseArgs(&resp, retention)...)...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if ct.RowsAffected() == 0 {
		return store.ErrLost
	}
	return nil
}

// Release deletes the running record held under token.
func (s *Store) Release(ctx context.Context, id store.ID, token int64) error {
	if _, err := s.pool.Exec(ctx, sqlRelease, id.Scope, id.Key, token); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// BeginAtomic claims a key for an atomic-mode request with the store's claim strategy, or
// returns its live record.
func (s *Store) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[DBTX], *store.Record, error) {
	sp := s.spec(c)
	t, rec, err := s.strategy.beginAtomic(ctx, s, &sp)
	if t == nil {
		return nil, rec, err
	}
	return t, nil, nil
}

// BeginCompletion opens the completion transaction of a lease-mode claim held under token: BEGIN
// and the lock of the running record in one round trip.
func (s *Store) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[DBTX], error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlLockLease, c.ID.Scope, c.ID.Key, token)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var lock pgconn.CommandTag
	if err == nil {
		lock, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.discard(conn)
		return nil, fmt.Errorf("lock lease record: %w", err)
	}
	if lock.RowsAffected() == 0 {
		s.discard(conn)
		return nil, store.ErrLost
	}
	sp := s.spec(c)
	return newTx(s, conn, &sp, token, commitUpdate, nil), nil
}

// BeginPlain opens a transaction with no record; its BEGIN travels with the handler's first
// statement, so a handler that sends none costs no round trip.
func (s *Store) BeginPlain(ctx context.Context) (store.Tx[DBTX], error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	return newTx(s, conn, nil, 0, commitPlain, &pendingBlock{s: s, conn: conn}), nil
}

// claimSpec is one atomic-mode claim as the statements need it. It is built once per request
// and never changes.
type claimSpec struct {
	store.Claim
	lockKey     int64
	lock        claimLock
	lockTimeout time.Duration
}

func (s *Store) spec(c store.Claim) claimSpec {
	sp := claimSpec{Claim: c, lockKey: claimLockKey(c.ID.Scope, c.ID.Key), lock: lockTry, lockTimeout: s.opts.ConflictTimeout}
	switch {
	case s.opts.NoAdvisoryLocks:
		sp.lock, sp.lockTimeout = lockNone, max(s.opts.ConflictTimeout, c.Wait)
	case c.Wait > 0:
		sp.lock, sp.lockTimeout = lockWait, c.Wait
	}
	return sp
}

// claimArgs are the parameters $1..$8 of the claim statements; token is $6.
func claimArgs(c *store.Claim, token any) []any {
	return []any{c.ID.Scope, c.ID.Key, c.Operation, c.Fingerprint.Sum[:], int16(c.Fingerprint.Version), token,
		c.Retention.Microseconds(), c.Lease.Microseconds()}
}

// atomicClaimArgs are claimArgs plus $9, the claim lock key.
func atomicClaimArgs(sp *claimSpec, token int64) []any {
	return append(claimArgs(&sp.Claim, token), sp.lockKey)
}

// responseArgs are the stored response's parameters of sqlComplete ($4..$8).
func responseArgs(r *store.Response, retention time.Duration) []any {
	var headers any
	if r.Header != nil {
		headers = string(r.Header)
	}
	body := r.Body
	if body == nil && !r.BodyOmitted {
		body = []byte{}
	}
	return []any{int16(r.Status), headers, body, r.BodyOmitted, retention.Microseconds()}
}

// row is a record as read, with the database's decision whether it is still live.
type row struct {
	rec  store.Record
	live bool
}

// rawRecord holds recordCols as scanned: every column may be NULL when a LEFT JOIN found no row.
type rawRecord struct {
	operation   *string
	fingerprint []byte
	fpVersion   *int16
	state       *string
	token       *int64
	live        *bool
	leaseLeftUS *int64
	status      *int16
	headers     []byte
	body        []byte
	bodyOmitted *bool
	retentionUS *int64
}

func (r *rawRecord) targets() []any {
	return []any{&r.operation, &r.fingerprint, &r.fpVersion, &r.state, &r.token, &r.live,
		&r.leaseLeftUS, &r.status, &r.headers, &r.body, &r.bodyOmitted, &r.retentionUS}
}

// row converts the scanned columns; nil when there was no row.
func (r *rawRecord) row() *row {
	if r.operation == nil || r.state == nil {
		return nil
	}
	out := &row{rec: store.Record{Operation: *r.operation, State: store.Running}}
	if *r.state == "completed" {
		out.rec.State = store.Completed
	}
	copy(out.rec.Fingerprint.Sum[:], r.fingerprint)
	if r.fpVersion != nil {
		out.rec.Fingerprint.Version = uint16(*r.fpVersion)
	}
	if r.token != nil {
		out.rec.Token = *r.token
	}
	if r.live != nil {
		out.live = *r.live
	}
	if r.leaseLeftUS != nil {
		out.rec.LeaseLeft = time.Duration(*r.leaseLeftUS) * time.Microsecond
	}
	if r.status != nil {
		out.rec.Response.Status = int(*r.status)
	}
	out.rec.Response.Header = r.headers
	out.rec.Response.Body = r.body
	if r.bodyOmitted != nil {
		out.rec.Response.BodyOmitted = *r.bodyOmitted
	}
	if r.retentionUS != nil && *r.retentionUS > 0 {
		out.rec.RetentionLeft = time.Duration(*r.retentionUS) * time.Microsecond
	}
	return out
}

// querier is what read needs from a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read is the plain SELECT of one record; nil when there is no row (live or not).
func (s *Store) read(ctx context.Context, q querier, id store.ID) (*row, error) {
	var raw rawRecord
	err := q.QueryRow(ctx, sqlRead, id.Scope, id.Key).Scan(raw.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	return raw.row(), nil
}

// rollback ends conn's transaction block, if any. Failure closes the connection, which makes the
// server roll back.
func (s *Store) rollback(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() || conn.Conn().PgConn().TxStatus() == 'I' {
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
func (s *Store) discard(conn *pgxpool.Conn) {
	s.rollback(conn)
	conn.Release()
}

// prepare makes sure conn has the statements of a batch that may fail on purpose as named
// prepared statements. pgx drops a batch's statements from its statement cache whenever the
// batch fails, so without this every replay whose claim pipeline stops with an error would make
// the connection's next claim prepare its statements again: extra round trips the tracer does
// not show. Named statements are not in that cache; preparing them is a map lookup after the
// first time on a connection. Only the caching exec modes need it (and the simple protocol, used
// behind transaction-pooling proxies, must not get prepared statements).
func (s *Store) prepare(ctx context.Context, conn *pgx.Conn, sqls ...string) error {
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

// isLockTimeout reports a claim that lost to a concurrent claim of the same key: PostgreSQL's
// lock_not_available (55P03, raised by lock_timeout), or a serialization failure or deadlock
// (40001, 40P01), which engines running READ COMMITTED as snapshot isolation (YugabyteDB without
// yb_enable_read_committed_isolation) raise instead of waiting. Either way the key is in flight.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "55P03", "40001", "40P01":
		return true
	}
	return false
}

// isStop reports the deliberate failure of sqlClaimedOrStop, sqlLockOrStop and
// sqlCompleteOrStop (an integer cast of a sentence: invalid_text_representation).
func isStop(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02"
}

// isUniqueViolation reports SQLSTATE 23505.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// randomToken returns a positive random int64 for atomic claim ids.
func randomToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1<<32
}
