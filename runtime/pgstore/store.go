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
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
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
	// The partitioned layout needs advisory locks: New panics when both are set.
	NoAdvisoryLocks bool
	// ConflictTimeout is the atomic-mode claim's lock_timeout. With advisory locks it only
	// bounds waits that are not another claim of the key (relation extension under load);
	// default 1s. With NoAdvisoryLocks it is also how long a duplicate waits for a running claim
	// before ErrBusy; default 50ms. A claim with a Wait (concurrency.wait) waits that long in
	// each of its probes, holding a connection, and without one between them (WaitPoll).
	ConflictTimeout time.Duration
	// Partitioned says that the table has the layout partitioned by expiry
	// (MigratePartitioned): expired records are never reused or deleted row by row, their
	// partitions are dropped whole by a PartitionSweeper. It must match the schema.
	Partitioned bool
	// ReservedConns is how many of the pool's connections are kept for lookups (replays, 409s,
	// 422s, lease claims): transactions that a handler holds open (an atomic-mode claim, a
	// lease-mode completion, a request without a key) may use the others only, and a new key
	// that finds them all taken waits for one without holding a connection, within the
	// request's store timeout. So slow handlers can fill their share of the pool, never the
	// lookups'. Default: a tenth of the pool's MaxConns, at least 1 (none for a pool of 1);
	// negative: no reservation.
	ReservedConns int
	// TenantShare is the largest share of those handler slots (the pool less ReservedConns)
	// that one tenant's transactions may hold at once, at least one slot and, when there are
	// two or more, leaving at least one to the other tenants: a tenant's new key
	// beyond it waits for one of its own slots to free (within the request's store timeout,
	// then 503), while other tenants' new keys take the free ones. The tenant is the claim's
	// (store.Claim.Tenant: the runtime's ScopeFunc's, whatever scope headers add), or the
	// tenant in a request without a key's context (store.WithTenant); the empty tenant of a
	// single-tenant service is not limited. Default 0.75; 1 or more: no share.
	TenantShare float64
	// ClientCheckInterval is client_connection_check_interval (PostgreSQL 14 and later) for the
	// transactions of atomic-mode claims and lease-mode completions: a backend whose client died
	// (a SIGKILLed process) while one of its handler's statements runs notices within this
	// interval, ends the statement and releases the key (or the record's row lock). Without it the key stays claimed (409) until that
	// statement ends on its own. Default 1s; negative: not set (the server's setting applies).
	// Ignored on servers older than 14, and on platforms without POLLRDHUP (PostgreSQL checks
	// the connection on Linux only).
	ClientCheckInterval time.Duration
	// Limits are the per-scope limits: stored body bytes (on by default) and completed records
	// per interval (off by default).
	Limits Limits
	// WaitPoll is the longest interval between the probes of a duplicate that waits for a
	// concurrent claim of its key (store.Claim.Wait, concurrency.wait). The waiter holds no
	// connection between probes; a claim that ends in this Store wakes it at once, so the
	// interval only delays noticing a claim that ended on another process (another replica).
	// Intervals start at 4ms and double up to WaitPoll, with jitter. Default 100ms; at least 4ms.
	WaitPoll time.Duration
	// Pooling says whether a pooler that pools transactions (PgBouncer's
	// pool_mode=transaction) sits between the pool and PostgreSQL: PoolingTransaction makes the
	// store keep no state in a session, and refuse what needs one. Default PoolingDetect: Open
	// finds out, New assumes PoolingSession (a direct connection). New panics, and Open fails,
	// under PoolingTransaction with ClaimWithStatement.LockAtRead or with a statement mode
	// other than exec, cache_describe and simple_protocol (docs/runtime.md, "Behind a
	// connection pooler").
	Pooling Pooling
	// Concurrency is how many requests with a handler you expect this process to run at once
	// (atomic-mode claims and lease-mode completions hold a connection while their handler
	// runs). Open warns when the pool cannot hold that many besides ReservedConns, with the
	// pool_max_conns to set; a new key beyond the pool waits for a connection, and gets 503
	// once the runtime's StoreTimeout has passed. Default 0: Open warns only about a pool
	// left at pgxpool's default size.
	Concurrency int
	// Logger receives Open's warnings. Default slog.Default().
	Logger *slog.Logger
}

// Store is the PostgreSQL store over one pool. It is safe for concurrent use and holds no state
// besides the pool, its options, the count of connections its transactions hold, whether the
// server takes client_connection_check_interval, the duplicates waiting for a claim of their
// key to end (wait.go), and each tenant's stored bytes counted ahead (ahead.go).
type Store struct {
	pool     *pgxpool.Pool
	opts     Options
	strategy ClaimStrategy
	q        *statements
	lim      limits
	// prepared: the pool's connections cache statements (pgx's caching exec modes), so the
	// statements of batches that may fail on purpose are prepared by name (see prepare).
	prepared bool
	// tracer is the pool's connections' pgx.QueryTracer (ConnConfig.Tracer), which a direct
	// read calls as pgx would (directread.go); nil when none is set.
	tracer pgx.QueryTracer
	// slots are the connections transactions may hold while their handlers run
	// (Options.ReservedConns), and each tenant's share of them (Options.TenantShare).
	slots *handlerSlots
	// checkInterval is ClientCheckInterval as set_config takes it, in milliseconds; "" when
	// not set. checkable is whether the server takes it: 0 not known yet, 1 yes, 2 no.
	checkInterval string
	checkable     atomic.Int32
	// waiting holds the duplicates waiting for a concurrent claim of their key; waitPoll is
	// Options.WaitPoll with its default.
	waiting waiters
	// claiming holds the keys of this Store's atomic-mode claims in progress (inflight.go).
	claiming inflight
	waitPoll time.Duration
	// ahead holds the stored bytes counted ahead for each tenant's next responses
	// (Limits.BodyBytes); claims the claims counted ahead for its next new keys
	// (Limits.Records).
	ahead, claims ahead
	// eng is the database's engine (engine.go), learned by ready before the first operation;
	// q, strategy and refused are set for it then. resolved publishes them (an atomic store
	// after the writes, an atomic load before the reads).
	eng      engine
	refused  error
	resolved atomic.Bool
	resolve  sync.Mutex
}

var _ store.Transactional[DBTX] = (*Store)(nil)

// New returns the store of the idempotency_records table on pool (see Migrate and
// MigratePartitioned), trusting Options.Pooling (Open checks it against the server). It panics
// where Open returns an error without asking the server: when opts set both Partitioned and
// NoAdvisoryLocks, and under PoolingTransaction with ClaimWithStatement.LockAtRead or a
// statement mode that keeps prepared statements in the session. It does
// not touch the database: the store learns which engine it runs on at its first operation,
// and on an engine where an option cannot work every operation returns the error Open would
// have returned (ErrUnsupported, with the reason).
func New(pool *pgxpool.Pool, opts Options) *Store {
	if err := checkOptions(opts); err != nil {
		panic(err.Error())
	}
	if err := checkPooling(pool, opts); err != nil {
		panic(err.Error())
	}
	if opts.ConflictTimeout <= 0 {
		opts.ConflictTimeout = time.Second
		if opts.NoAdvisoryLocks {
			opts.ConflictTimeout = 50 * time.Millisecond
		}
	}
	s := &Store{pool: pool, opts: opts, strategy: opts.Claim, lim: newLimits(opts.Limits)}
	s.waitPoll = opts.WaitPoll
	if s.waitPoll <= 0 {
		s.waitPoll = defaultWaitPoll
	}
	s.waitPoll = max(s.waitPoll, waitPollMin)
	s.setEngine(plainPostgres)
	cfg := pool.Config()
	s.tracer = cfg.ConnConfig.Tracer
	switch cfg.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		// Behind a pooler that pools transactions a statement prepared by name stays in one
		// server session; cache_describe is the caching mode that works there.
		s.prepared = opts.Pooling != PoolingTransaction
	}
	maxConns := int(cfg.MaxConns)
	reserved := opts.ReservedConns
	if reserved == 0 && maxConns > 1 {
		reserved = max(1, maxConns/10)
	}
	if reserved < 0 || reserved >= maxConns {
		reserved = 0
	}
	share := opts.TenantShare
	if share == 0 {
		share = defaultTenantShare
	}
	s.slots = newHandlerSlots(maxConns-reserved, share)
	switch {
	case opts.ClientCheckInterval == 0:
		s.checkInterval = "1000"
	case opts.ClientCheckInterval > 0:
		s.checkInterval = strconv.FormatInt(max(opts.ClientCheckInterval.Milliseconds(), 1), 10)
	}
	return s
}

// setEngine sets what depends on the database's engine: the statements, the claim strategy
// and whether the options can work there. Before resolved is set only.
func (s *Store) setEngine(e engine) {
	s.eng = e
	s.q = newStatements(s.opts.Partitioned, e, s.opts.ConflictTimeout)
	s.strategy = s.opts.Claim
	if s.strategy == nil {
		s.strategy = ClaimWithStatement{}
	}
	if _, ok := s.strategy.(ClaimPipelined); ok && (s.opts.Partitioned || s.lim.records > 0 || e.citus) {
		// The pipelined claim inserts its row in the statement that takes the lock, under a
		// snapshot older than the lock: only a unique index makes that safe. And its claim
		// runs in the transaction the handler then holds, so a records cap could count it
		// there only where concurrent claims cannot see it: ClaimReadFirst counts it in its
		// read, at no extra round trip. On Citus its claim's lock wait, set before BEGIN in
		// the claim's implicit transaction, could not reach the worker (SET LOCAL is
		// propagated in a transaction block only).
		s.strategy = ClaimReadFirst{}
	}
	s.refused = e.refuse(s.opts)
}

// ready makes sure the store knows its database's engine (engine.go) before an operation: the
// first call asks the catalog, within ctx and resolveTimeout; a failure is returned and the
// next call asks again. It returns the refusal of an option the engine cannot work with.
func (s *Store) ready(ctx context.Context) error {
	if s.resolved.Load() {
		return s.refused
	}
	s.resolve.Lock()
	defer s.resolve.Unlock()
	if s.resolved.Load() {
		return s.refused
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	e, err := detectEngine(ctx, s.pool)
	if err != nil {
		return err
	}
	s.setEngine(e)
	s.resolved.Store(true)
	return s.refused
}

// trySlot takes a handler slot for tenant if it may have one now.
func (s *Store) trySlot(t slotTenant) bool { return s.slots.try(t) }

// waitSlot waits for a handler slot for tenant until ctx ends.
func (s *Store) waitSlot(ctx context.Context, t slotTenant) error { return s.slots.wait(ctx, t) }

// freeSlot returns tenant's handler slot.
func (s *Store) freeSlot(t slotTenant) { s.slots.give(t) }

// acquireTx acquires a connection for a transaction that a handler of tenant will hold: a
// handler slot first, then the connection.
func (s *Store) acquireTx(ctx context.Context, t slotTenant) (*pgxpool.Conn, error) {
	if err := s.waitSlot(ctx, t); err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.freeSlot(t)
		return nil, fmt.Errorf("acquire: %w", err)
	}
	return conn, nil
}

// slotFor makes conn, acquired for a lookup, a connection a handler of tenant may hold: it
// takes a free handler slot, or else gives conn back, waits for a slot and acquires another
// connection.
func (s *Store) slotFor(ctx context.Context, conn *pgxpool.Conn, t slotTenant) (*pgxpool.Conn, error) {
	if s.trySlot(t) {
		return conn, nil
	}
	conn.Release()
	return s.acquireTx(ctx, t)
}

// tenantOf is the tenant a claim's handler slot and per-scope limits count against: the
// claim's Tenant, or its scope.
func tenantOf(c *store.Claim, d recordDigest) slotTenant {
	switch {
	case c.Tenant == "" && c.ID.Scope == "":
		return slotTenant{exempt: true}
	case c.Tenant == "" || c.Tenant == c.ID.Scope:
		return slotTenant{digest: d.scope}
	}
	return slotTenant{digest: store.ScopeDigest(c.Tenant)}
}

// checks reports whether the store sets client_connection_check_interval and the server takes
// it: PostgreSQL 14 and later, on a platform that reports closed sockets (not Windows, where
// setting it is an error). The first call asks the server on conn, which must be idle; the
// answer holds for the Store's life.
func (s *Store) checks(conn *pgx.Conn) bool {
	if s.checkInterval == "" {
		return false
	}
	switch s.checkable.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	v := conn.PgConn().ParameterStatus("server_version")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	ok := err == nil && n >= 14 && !strings.Contains(v, "YB")
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := conn.QueryRow(ctx, `SELECT version() !~* '(windows|visual c\+\+|mingw)'`).Scan(&ok)
		if err != nil {
			return false // ask again next time
		}
	}
	if ok {
		s.checkable.Store(1)
	} else {
		s.checkable.Store(2)
	}
	return ok
}

// Pool returns the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Pooling returns how the store takes the pool's connections to reach PostgreSQL: Options.Pooling
// as Open found it out, or as New was told (PoolingDetect is PoolingSession there).
func (s *Store) Pooling() Pooling {
	if s.opts.Pooling == PoolingDetect {
		return PoolingSession
	}
	return s.opts.Pooling
}

// maxClaimAttempts bounds the claim loops: each extra attempt follows a race that the database
// resolved under us (a conflicting claim rolled back, a row swept or taken over).
const maxClaimAttempts = 4

// Get returns the key's live record: one plain SELECT, no lock, no transaction id.
func (s *Store) Get(ctx context.Context, id store.ID) (store.Record, bool, error) {
	if err := s.ready(ctx); err != nil {
		return store.Record{}, false, err
	}
	r, err := s.read(ctx, s.pool, digest(id), "")
	if err != nil || r == nil || !r.live {
		return store.Record{}, false, err
	}
	return r.rec, true, nil
}

// Reserve claims a key for lease mode with autocommitted statements (one round trip for a new
// key or a live record). A key whose record expired is claimed in its row with the next token
// (plain layout), or in a new row with the next token (partitioned).
func (s *Store) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	if err := s.ready(ctx); err != nil {
		return store.Reservation{}, err
	}
	sp := s.spec(c)
	d := sp.d
	// A records cap counts the claim once, in the first attempt's pipeline.
	charge := s.lim.records > 0 && !c.Counted
	for range maxClaimAttempts {
		var raw rawRecord
		var token *int64
		var admitted bool
		var left int64
		var err error
		targets := append([]any{&token}, raw.targetsTomb()...)
		if s.q.partitioned || charge {
			// One pipeline: the claim's count (Limits.Records), the partitioned layout's lock,
			// the claim.
			b := &pgx.Batch{}
			if charge {
				b.Queue(s.q.chargeClaim, s.chargeArgs(&sp)...)
			}
			args := claimArgs(&c, d, int64(1))
			if s.q.partitioned {
				b.Queue(s.q.reserveLock, d.lock)
				args = claimArgs(&c, d, nil)
			}
			b.Queue(s.q.reserve, args...)
			br := s.pool.SendBatch(ctx, b)
			if charge {
				err = br.QueryRow().Scan(&admitted, &left)
			}
			if err == nil && s.q.partitioned {
				_, err = br.Exec()
			}
			if err == nil {
				err = br.QueryRow().Scan(targets...)
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
		} else {
			err = s.pool.QueryRow(ctx, s.q.reserve, claimArgs(&c, d, int64(1))...).Scan(targets...)
		}
		if err != nil {
			if isLockTimeout(err) {
				// The key's lock was held past ConflictTimeout (takeClaimLocks): look again.
				continue
			}
			return store.Reservation{}, fmt.Errorf("reserve: %w", err)
		}
		over := charge && !admitted
		if charge && admitted {
			charge = false // counted (or the key had a live record): not again
		}
		if token != nil {
			if over {
				// Claimed, but the tenant is over its records cap: give the key back.
				_ = s.Release(ctx, c.ID, *token)
				return store.Reservation{}, s.lim.overLimit(left)
			}
			return store.Reservation{Token: *token}, nil
		}
		r := raw.row()
		if r == nil {
			// The conflicting row committed after our snapshot, or rolled back, or (partitioned)
			// a concurrent claim held the key's lock: look again.
			if r, err = s.read(ctx, s.pool, d, c.Operation); err != nil {
				return store.Reservation{}, err
			}
			if r == nil {
				if over {
					return store.Reservation{}, s.lim.overLimit(left)
				}
				continue
			}
		}
		if r.live {
			return store.Reservation{Record: r.rec}, nil
		}
		if over {
			return store.Reservation{}, s.lim.overLimit(left)
		}
		if s.q.partitioned {
			continue // expired records are never reused there (and never read)
		}
		var next int64
		switch err := s.pool.QueryRow(ctx, s.q.takeExpired, claimArgs(&c, d, nil)...).Scan(&next); {
		case errors.Is(err, pgx.ErrNoRows):
			continue // someone else moved first
		case err != nil:
			return store.Reservation{}, fmt.Errorf("reserve expired record: %w", err)
		}
		return store.Reservation{Token: next}, nil
	}
	return store.Reservation{}, store.ErrBusy
}

// Admit reads the key's live record, and when it has none counts a new claim of it against the
// tenant's records cap (store.Admitter): a *store.LimitError when the cap is reached. A paired
// Redis lease store calls it as it grants a claim. One statement, autocommitted.
func (s *Store) Admit(ctx context.Context, c store.Claim) (store.Record, bool, error) {
	if err := s.ready(ctx); err != nil {
		return store.Record{}, false, err
	}
	if s.lim.records <= 0 || c.Counted {
		return s.Get(ctx, c.ID)
	}
	sp := s.spec(c)
	r, _, err := s.readLimited(ctx, s.pool, &sp, false)
	if err != nil || r == nil || !r.live {
		return store.Record{}, false, err
	}
	return r.rec, true, nil
}

var _ store.Admitter = (*Store)(nil)

// TakeOver moves a running record whose lease ended from token old to the next token.
func (s *Store) TakeOver(ctx context.Context, c store.Claim, old int64) (int64, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	d := digest(c.ID)
	var next int64
	err := s.pool.QueryRow(ctx, s.q.takeOverLease, d.scope, d.key, old, c.Lease.Microseconds()).Scan(&next)
	switch {
	case errors.Is(err, pgx.ErrNoRows), isMoved(err):
		return 0, store.ErrLost
	case err != nil:
		return 0, fmt.Errorf("take over: %w", err)
	}
	return next, nil
}

// Extend moves the running record's lease end to d after the database's now().
func (s *Store) Extend(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	dg := digest(id)
	ct, err := s.pool.Exec(ctx, s.q.extendLease, dg.scope, dg.key, token, d.Microseconds())
	if isMoved(err) {
		return store.ErrLost
	}
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	if ct.RowsAffected() == 0 {
		return store.ErrLost
	}
	return nil
}

// Complete stores resp under token in an autocommitted statement, for completions that write
// nothing else (lease mode without a CompleteFunc transaction); the record's started calls get
// its outcome, and its tombstone is written, in the same statement.
func (s *Store) Complete(ctx context.Context, c store.Claim, token int64, resp store.Response) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	sp := s.spec(store.Claim{ID: c.ID, Tenant: c.Tenant})
	d := sp.d
	if err := s.chargeBody(ctx, s.pool, &sp, &resp); err != nil {
		return err
	}
	var n int64
	args := append([]any{d.scope, d.key, token}, responseArgs(&resp, c.Retention)...)
	err := s.pool.QueryRow(ctx, s.q.completeSettling, append(args, tombstoneHorizon(&c))...).Scan(&n)
	if isMoved(err) {
		return store.ErrLost
	}
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n == 0 {
		return store.ErrLost
	}
	return nil
}

// Release deletes the running record held under token.
func (s *Store) Release(ctx context.Context, id store.ID, token int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	d := digest(id)
	if _, err := s.pool.Exec(ctx, s.q.release, d.scope, d.key, token); err != nil && !isMoved(err) {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// BeginAtomic claims a key for an atomic-mode request with the store's claim strategy, or
// returns its live record. While a concurrent claim holds the key, it returns store.ErrBusy at
// once, or, with c.Wait, waits up to c.Wait for that claim to end without holding a connection
// (waitAtomic).
func (s *Store) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[DBTX], *store.Record, error) {
	if err := s.ready(ctx); err != nil {
		return nil, nil, err
	}
	sp := s.spec(c)
	var (
		t   *tx
		rec *store.Record
		err error
	)
	if c.Wait > 0 {
		t, rec, err = s.waitAtomic(ctx, &sp)
	} else {
		t, rec, err = s.beginOnce(ctx, &sp)
	}
	if t == nil {
		return nil, rec, err
	}
	return t, nil, nil
}

// beginOnce claims sp's key with the store's strategy, or returns its live record, unless this
// Store has a claim of the key in progress: store.ErrBusy then, with no round trip
// (inflight.go).
func (s *Store) beginOnce(ctx context.Context, sp *claimSpec) (*tx, *store.Record, error) {
	key := sp.d.key.Bytes
	if s.claiming.has(key) {
		return nil, nil, store.ErrBusy
	}
	t, rec, err := s.strategy.beginAtomic(ctx, s, sp)
	if t != nil && !t.entered {
		// Claimed before the handler (the database's lock says it is ours): recorded now.
		t.entered = s.claiming.enter(key)
	}
	return t, rec, err
}

// BeginCompletion opens the completion transaction of a lease-mode claim held under token: BEGIN
// and the lock of the running record in one round trip.
func (s *Store) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[DBTX], error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	sp := s.spec(c)
	conn, err := s.acquireTx(ctx, sp.tenant)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// A backend whose client dies while a statement of the completion runs ends it within the
	// interval, and with it the record's row lock, as an atomic claim's does.
	checked := s.checks(conn.Conn())
	if checked {
		b.Queue(sqlSetCheckInterval, s.checkInterval)
	}
	b.Queue(s.q.lockLease, sp.d.scope, sp.d.key, token)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil && checked {
		_, err = br.Exec()
	}
	var lock pgconn.CommandTag
	if err == nil {
		lock, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || lock.RowsAffected() == 0 {
		s.discard(conn)
		s.freeSlot(sp.tenant)
		if err == nil || isMoved(err) {
			return nil, store.ErrLost
		}
		return nil, fmt.Errorf("lock lease record: %w", err)
	}
	t := newTx(s, conn, &sp, token, commitUpdate, nil)
	t.slot = true
	return t, nil
}

// defaultTenantShare is Options.TenantShare's default.
const defaultTenantShare = 0.75

// BeginPlain opens a transaction with no record; its BEGIN travels with the handler's first
// statement, so a handler that sends none costs no round trip.
func (s *Store) BeginPlain(ctx context.Context) (store.Tx[DBTX], error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	tenant := slotTenant{exempt: true}
	if name, ok := store.TenantFrom(ctx); ok && name != "" {
		tenant = slotTenant{digest: store.ScopeDigest(name)}
	}
	conn, err := s.acquireTx(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := newTx(s, conn, nil, 0, commitPlain, &pendingBlock{s: s, conn: conn})
	t.slot, t.tenant = true, tenant
	return t, nil
}

// claimSpec is one atomic-mode claim as the statements need it. It is built once per request
// and never changes. A claim with a Wait uses the same lock as one without: the store waits
// between claims, not inside one (waitAtomic).
type claimSpec struct {
	store.Claim
	d recordDigest
	// tenant is who the claim's handler slot counts against (tenantOf).
	tenant      slotTenant
	lock        claimLock
	lockTimeout time.Duration
}

func (s *Store) spec(c store.Claim) claimSpec {
	sp := claimSpec{Claim: c, d: digest(c.ID), lock: lockTry, lockTimeout: s.opts.ConflictTimeout}
	sp.tenant = tenantOf(&c, sp.d)
	if s.opts.NoAdvisoryLocks {
		sp.lock = lockNone
	}
	return sp
}

// claimArgs are the parameters $1..$8 of the claim statements; token is $6.
func claimArgs(c *store.Claim, d recordDigest, token any) []any {
	return []any{d.scope, d.key, c.Operation, c.Fingerprint.Sum[:], int16(c.Fingerprint.Version), token,
		c.Retention.Microseconds(), c.Lease.Microseconds()}
}

// atomicClaimArgs are claimArgs plus $9, the claim lock key.
func atomicClaimArgs(sp *claimSpec, token int64) []any {
	return append(claimArgs(&sp.Claim, sp.d, token), sp.d.lock)
}

// responseArgs are the stored response's parameters of statements.complete ($4..$8).
func responseArgs(r *store.Response, retention time.Duration) []any {
	headers, body := r.Header, r.Body
	if headers == nil {
		headers = []byte{}
	}
	if body == nil {
		body = []byte{}
	}
	return []any{int16(r.Status), headers, body, r.BodyOmitted, retention.Microseconds()}
}

// tombstoneHorizon is the tombstone's horizon of claim c after completion, in microseconds
// (the completion statements' last parameter): 0 when c keeps none.
func tombstoneHorizon(c *store.Claim) int64 {
	if c.Tombstone <= c.Retention {
		return 0
	}
	return c.Tombstone.Microseconds()
}

// row is a record as read, with the database's decision whether it is still live.
type row struct {
	rec  store.Record
	live bool
}

// rawRecord holds recordCols as scanned: every column may be NULL when a LEFT JOIN found no row.
// The nullable columns scan into pgtype values rather than pointers, which pgx would allocate
// one by one on every read.
type rawRecord struct {
	operation   pgtype.Text
	fingerprint []byte
	fpVersion   pgtype.Int2
	status      pgtype.Int2
	token       pgtype.Int8
	live        pgtype.Bool
	leaseLeftUS pgtype.Int8
	headers     []byte
	body        []byte
	bodyOmitted pgtype.Bool
	retentionUS pgtype.Int8
	// forgetUS is how long past its expiry the record still remembers its key (positive: the
	// expired record is its own tombstone); doneAt when it completed.
	forgetUS pgtype.Int8
	doneAt   pgtype.Timestamptz
	// The key's tombstone (tombstoneCols), read when it has no live record.
	tomb []byte
	// buf backs targets' slice: the record's targets and those around them in a statement.
	buf [24]any
}

// targets returns the scan targets of recordCols followed by extra.
func (r *rawRecord) targets(extra ...any) []any {
	t := append(r.buf[:0], &r.operation, &r.fingerprint, &r.fpVersion, &r.status, &r.token, &r.live,
		&r.leaseLeftUS, &r.headers, &r.body, &r.bodyOmitted, &r.retentionUS, &r.forgetUS, &r.doneAt)
	return append(t, extra...)
}

// targetsRead returns the scan targets of readCols (recordLiveCols and the tombstone), then
// extra.
func (r *rawRecord) targetsRead(extra ...any) []any {
	t := append(r.buf[:0], &r.operation, &r.fingerprint, &r.fpVersion, &r.status, &r.token, &r.live,
		&r.leaseLeftUS, &r.headers, &r.body, &r.bodyOmitted, &r.retentionUS, &r.tomb)
	return append(t, extra...)
}

// targetsTomb returns the scan targets of recordCols, then tombstoneCols, then extra.
func (r *rawRecord) targetsTomb(extra ...any) []any {
	t := r.targets(&r.tomb)
	return append(t, extra...)
}

// row converts the scanned columns; nil when there was no row. A status of 0 is a running
// record. A key without a live record is remembered by its expired record whose forget_at has
// not passed, or else by the tombstone read: that tombstone (an Expired record, live: the key
// is taken) is the row.
func (r *rawRecord) row() *row {
	if r.status.Valid && r.status.Int16 != 0 && !r.live.Bool && r.forgetUS.Int64 > 0 {
		t := &row{rec: store.Record{State: store.Expired, StatusClass: int(r.status.Int16) / 100}, live: true}
		copy(t.rec.Fingerprint.Sum[:store.TombstoneSumBytes], r.fingerprint)
		t.rec.Fingerprint.Version = uint16(r.fpVersion.Int16)
		t.rec.CompletedAt = r.doneAt.Time
		t.rec.ForgetLeft = time.Duration(r.forgetUS.Int64) * time.Microsecond
		return t
	}
	if r.tomb != nil && (!r.live.Valid || !r.live.Bool) {
		if rec, ok := decodeTombstone(r.tomb); ok {
			return &row{rec: rec, live: true}
		}
	}
	if !r.operation.Valid || !r.status.Valid {
		return nil
	}
	out := &row{rec: store.Record{Operation: r.operation.String, State: store.Running}, live: r.live.Bool}
	copy(out.rec.Fingerprint.Sum[:], r.fingerprint)
	out.rec.Fingerprint.Version = uint16(r.fpVersion.Int16)
	out.rec.Token = r.token.Int64
	if r.status.Int16 != 0 {
		out.rec.State = store.Completed
		out.rec.Response.Status = int(r.status.Int16)
		if len(r.headers) > 0 {
			out.rec.Response.Header = r.headers
		}
		out.rec.Response.Body = r.body
		if r.bodyOmitted.Bool {
			out.rec.Response.BodyOmitted, out.rec.Response.Body = true, nil
		}
	} else {
		out.rec.LeaseLeft = time.Duration(r.leaseLeftUS.Int64) * time.Microsecond
	}
	if r.retentionUS.Int64 > 0 {
		out.rec.RetentionLeft = time.Duration(r.retentionUS.Int64) * time.Microsecond
	}
	return out
}

// pgEpoch is PostgreSQL's epoch, from which timestamptz_send counts microseconds.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// decodeTombstone reads the column tombstoneCols packs: an Expired record; false when the value
// is not of that form.
func decodeTombstone(b []byte) (store.Record, bool) {
	if len(b) != 20+store.TombstoneSumBytes {
		return store.Record{}, false
	}
	rec := store.Record{State: store.Expired, StatusClass: int(int2(b[2:4]))}
	rec.Fingerprint.Version = uint16(int2(b[0:2]))
	rec.CompletedAt = pgEpoch.Add(time.Duration(int8v(b[4:12])) * time.Microsecond)
	rec.ForgetLeft = time.Duration(int8v(b[12:20])) * time.Microsecond
	copy(rec.Fingerprint.Sum[:store.TombstoneSumBytes], b[20:])
	return rec, true
}

// querier is what read needs from a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read is the plain SELECT of one record; nil when there is no row (live or not; the
// partitioned layout reads live records only). op is the operation the caller expects the
// record to be of (the claim's), or "": a record of that operation shares its name rather than
// copying it.
func (s *Store) read(ctx context.Context, q querier, d recordDigest, op string) (*row, error) {
	rr := newReadRow(d, op, false)
	err := s.runRead(ctx, q, s.q.read, rr)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	return rr.row(), nil
}

// readProbe is read that, when the key has no record, also tries the claim lock: busy when a
// concurrent claim holds it (statements.readProbe).
func (s *Store) readProbe(ctx context.Context, q querier, d recordDigest, op string) (r *row, busy bool, err error) {
	rr := newReadRow(d, op, true)
	if err = s.runRead(ctx, q, s.q.readProbe, rr); err != nil {
		return nil, false, fmt.Errorf("read record: %w", err)
	}
	return rr.row(), rr.busy, nil
}

// readRow is one record as read and readProbe read it, in one allocation: the statement's
// arguments, which pgx is given as pointers into it so that it boxes none of them, and the row,
// which ScanRow decodes (pgx.RowScanner) from the columns' binary values without pgx's scan
// plans, the stored headers and body copied into one buffer. This is a replay's read, so what
// it costs is most of what a replay costs beyond its round trip.
type readRow struct {
	// The arguments are of pgtype's types, whose pointers pgx encodes directly (a *int64 it
	// dereferences by reflection, which boxes the value).
	scope pgtype.Int8
	key   pgtype.UUID
	lock  pgtype.Int8
	args  [3]any // &scope, &key, &lock: $1, $2, $3
	// enc and params are the arguments in binary, for a direct read (directread.go).
	enc    [32]byte
	params [3][]byte
	probe  bool // the statement ends with the busy column (readProbe)
	// claimed: the statement ends with the claim column of statements.readLock (claimNone,
	// claimBusy, claimLocked, claimTaken), read into claim; busy is then claim == claimBusy.
	claimed bool
	claim   int16
	op      string // the operation expected, or ""
	found   bool   // a record, live or not (rawRecord.row)
	busy    bool
	out     row
}

func newReadRow(d recordDigest, op string, probe bool) *readRow {
	rr := &readRow{scope: pgtype.Int8{Int64: d.scope, Valid: true}, key: d.key, lock: pgtype.Int8{Int64: d.lock, Valid: true}, probe: probe, op: op}
	rr.args = [3]any{&rr.scope, &rr.key, &rr.lock}
	return rr
}

// row is the record read; nil when there was none.
func (rr *readRow) row() *row {
	if !rr.found {
		return nil
	}
	return &rr.out
}

// The types of the read's columns (pgtype's OIDs): readCols, in order, then
// then the busy column of readProbe.
var readColTypes = [...]uint32{pgtype.TextOID, pgtype.ByteaOID, pgtype.Int2OID, pgtype.Int2OID, pgtype.Int8OID,
	pgtype.BoolOID, pgtype.Int8OID, pgtype.ByteaOID, pgtype.ByteaOID, pgtype.BoolOID, pgtype.Int8OID,
	pgtype.ByteaOID, pgtype.BoolOID}

// Columns of readColTypes: the tombstone, and busy.
const (
	readColTomb = 11
	readColBusy = 12
)

// tailType is the type of the column after readCols in rr's statement: readProbe's busy
// (boolean), readLock's claim (smallint), or 0 when there is none (read).
func (rr *readRow) tailType() uint32 {
	switch {
	case rr.probe:
		return pgtype.BoolOID
	case rr.claimed:
		return pgtype.Int2OID
	}
	return 0
}

// colType is the type of rr's statement's column i.
func (rr *readRow) colType(i int) uint32 {
	if i == readColBusy {
		return rr.tailType()
	}
	return readColTypes[i]
}

// ScanRow decodes the row (pgx.RowScanner) from its values as pgx's extended protocol receives
// them: text as text, the rest in binary. A row in another form (the text format of the simple
// protocol, behind a proxy that needs it; a column of another type) is scanned by pgx as
// rawRecord, with the same result.
func (rr *readRow) ScanRow(rows pgx.Rows) error {
	n := len(readColTypes) - 1
	if rr.tailType() != 0 {
		n++
	}
	fds, vals := rows.FieldDescriptions(), rows.RawValues()
	if len(fds) != n || len(vals) != n {
		return fmt.Errorf("read record: %d columns, want %d", len(fds), n)
	}
	if !rr.decode(fds, vals) {
		return rr.scanRows(rows)
	}
	return nil
}

// decode decodes the row from fds and vals, its columns' descriptions and values (the columns
// of read, or readProbe's or readLock's, as many); false, having decoded nothing, when a column
// is not in the form decode reads: text as text, the rest in binary, each of its type
// (readRow.colType).
func (rr *readRow) decode(fds []pgconn.FieldDescription, vals [][]byte) bool {
	n := len(readColTypes) - 1
	if rr.tailType() != 0 {
		n++
	}
	if len(fds) != n || len(vals) != n {
		return false
	}
	for i, fd := range fds {
		// pgx asks for text in its text format (the same bytes) and for the others in binary.
		binaryOrText := fd.Format == pgx.BinaryFormatCode || fd.DataTypeOID == pgtype.TextOID
		if !binaryOrText || fd.DataTypeOID != rr.colType(i) || !fixedSize(fd.DataTypeOID, vals[i]) {
			return false
		}
	}
	switch {
	case rr.probe:
		rr.busy = len(vals[readColBusy]) == 1 && vals[readColBusy][0] != 0
	case rr.claimed:
		rr.claim = int2(vals[readColBusy])
		rr.busy = rr.claim == claimBusy
	}
	if live := len(vals[5]) == 1 && vals[5][0] != 0; vals[readColTomb] != nil && !live {
		// The key is remembered (a late retry): its tombstone is the record, as in rawRecord.row.
		if rec, ok := decodeTombstone(vals[readColTomb]); ok {
			rr.out, rr.found = row{rec: rec, live: true}, true
			return true
		}
	}
	// As rawRecord.row: no operation or no status is no record; a status of 0 is a running one.
	if vals[0] == nil || vals[3] == nil {
		return true
	}
	out := &rr.out
	out.rec = store.Record{State: store.Running}
	if op := vals[0]; string(op) == rr.op {
		out.rec.Operation = rr.op
	} else {
		out.rec.Operation = string(op)
	}
	out.live = len(vals[5]) == 1 && vals[5][0] != 0
	copy(out.rec.Fingerprint.Sum[:], vals[1])
	out.rec.Fingerprint.Version = uint16(int2(vals[2]))
	out.rec.Token = int8v(vals[4])
	if status := int2(vals[3]); status != 0 {
		out.rec.State = store.Completed
		out.rec.Response.Status = int(status)
		headers, body := vals[7], vals[8]
		if len(vals[9]) == 1 && vals[9][0] != 0 { // body_omitted
			body = nil
			out.rec.Response.BodyOmitted = true
		}
		buf := make([]byte, len(headers)+len(body))
		copy(buf, headers)
		copy(buf[len(headers):], body)
		if len(headers) > 0 {
			out.rec.Response.Header = buf[:len(headers):len(headers)]
		}
		if vals[8] != nil && !out.rec.Response.BodyOmitted {
			out.rec.Response.Body = buf[len(headers):]
		}
	} else {
		out.rec.LeaseLeft = time.Duration(int8v(vals[6])) * time.Microsecond
	}
	if left := int8v(vals[10]); left > 0 {
		out.rec.RetentionLeft = time.Duration(left) * time.Microsecond
	}
	rr.found = true
	return true
}

// scanRows scans the row with pgx's scan plans (rawRecord), for a row ScanRow does not decode
// itself.
func (rr *readRow) scanRows(rows pgx.Rows) error {
	var raw rawRecord
	targets := raw.targetsRead()
	switch {
	case rr.probe:
		targets = append(targets, &rr.busy)
	case rr.claimed:
		targets = append(targets, &rr.claim)
	}
	if err := rows.Scan(targets...); err != nil {
		return err
	}
	if rr.claimed {
		rr.busy = rr.claim == claimBusy
	}
	if r := raw.row(); r != nil {
		rr.out, rr.found = *r, true
		if r.rec.Operation == rr.op {
			rr.out.rec.Operation = rr.op
		}
	}
	return nil
}

// fixedSize reports whether v, a non-NULL binary value of type oid, has its type's size (NULL
// and the variable-length types always do).
func fixedSize(oid uint32, v []byte) bool {
	if v == nil {
		return true
	}
	switch oid {
	case pgtype.Int2OID:
		return len(v) == 2
	case pgtype.Int8OID, pgtype.TimestamptzOID:
		return len(v) == 8
	case pgtype.BoolOID:
		return len(v) == 1
	}
	return true
}

// int2 and int8v decode binary int2 and int8 values; NULL is 0.
func int2(v []byte) int16 {
	if len(v) != 2 {
		return 0
	}
	return int16(binary.BigEndian.Uint16(v))
}

func int8v(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// readLock is the read of ClaimWithStatement.LockAtRead (statements.readLock, or
// readLockCharged under a records cap; with readLocked behind it in the same round trip on a
// schema without idempotency_key_taken): the key's record, busy when a concurrent claim holds
// its lock, and locked when the session on conn now holds the lock. taken, with locked, says
// that the read under the lock found the key taken by a claim that committed after the first
// read's snapshot: r is then that record when readLocked read it, nil when the statement's own
// re-read found it (the caller gives the lock back and decides afresh). Under a records cap, a
// new key the cap refuses is store.LimitError, with locked set: the caller releases the lock.
// On any other error the lock may be held: the caller closes conn.
func (s *Store) readLock(ctx context.Context, conn *pgxpool.Conn, sp *claimSpec) (r *row, busy, locked, taken bool, err error) {
	d := sp.d
	capped := s.lim.records > 0 && !sp.Counted
	size := claimsAheadOf(s.lim.records, s.lim.recordsEach)
	// Under a cap that counts claims ahead the read is the plain one and a new key is counted
	// after it (countNewKey); under a smaller one the read counts it.
	charged := capped && size == 0
	var (
		first, again *row
		claim        int16
		admitted     bool
		left         int64
	)
	if charged || s.q.readLocked != "" {
		first, claim, admitted, left, again, err = s.readLockScanned(ctx, conn, sp, charged)
	} else {
		// One statement, which re-reads under the lock itself (idempotency_key_taken), read as
		// readProbe's is: directly on the connection where it can be (directread.go), else
		// through pgx into readRow. A replay costs here what the default claim's does.
		rr := newReadRow(d, sp.Operation, false)
		rr.claimed = true
		err = s.runRead(ctx, conn.Conn(), s.q.readLock, rr)
		first, claim = rr.row(), rr.claim
	}
	if err != nil {
		return nil, false, false, false, fmt.Errorf("read record: %w", err)
	}
	busy = claim == claimBusy
	countsAfter := capped && !charged
	if r = first; r != nil || busy {
		if charged && r != nil && !r.live && !admitted {
			return nil, false, false, false, s.lim.overLimit(left) // an expired record takes no lock
		}
		if countsAfter && r != nil && !r.live && !busy {
			err = s.countNewKey(ctx, conn, sp, size) // an expired record: a new claim of the key
		}
		return r, busy, false, false, err
	}
	if claim == claimTaken {
		// A claim committed between the read's snapshot and our lock: nothing was counted.
		return nil, false, true, true, nil
	}
	if charged && !admitted {
		return nil, false, true, false, s.lim.overLimit(left)
	}
	if r = again; r != nil {
		taken = true
	}
	if countsAfter && (r == nil || !r.live) {
		// A new key, locked: it is counted now (a LimitError leaves the lock for the caller
		// to release).
		err = s.countNewKey(ctx, conn, sp, size)
	}
	return r, false, true, taken, err
}

// readLockScanned is readLock's read under a records cap that the read counts
// (readLockCharged) or on a schema without idempotency_key_taken (readLocked pipelined behind
// it), scanned by pgx's scan plans: the first row's record and claim column, whether the cap
// admitted the claim and the interval's time left (readLockCharged), and the record readLocked
// read under the lock, if any.
func (s *Store) readLockScanned(ctx context.Context, conn *pgxpool.Conn, sp *claimSpec, charged bool) (first *row, claim int16, admitted bool, left int64, again *row, err error) {
	d := sp.d
	var raw, re rawRecord
	rr := newReadRow(d, sp.Operation, false)
	rr.claimed = true
	scan := func(row pgx.Row) error {
		if charged {
			err := row.Scan(raw.targetsTomb(&claim, &admitted, &left)...)
			first = raw.row()
			return err
		}
		err := row.Scan(rr)
		first, claim = rr.row(), rr.claim
		return err
	}
	query, args := s.q.readLock, rr.args[:]
	if charged {
		query, args = s.q.readLockCharged, []any{d.scope, d.key, sp.limitScope(), s.lim.recordsEach, s.lim.records, d.lock}
	}
	if s.q.readLocked == "" {
		err = scan(conn.Conn().QueryRow(ctx, query, args...))
		return first, claim, admitted, left, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(query, args...)
	b.Queue(s.q.readLocked, d.scope, d.key)
	br := conn.SendBatch(ctx, b)
	err = scan(br.QueryRow())
	if err == nil {
		err = br.QueryRow().Scan(re.targets()...)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return first, claim, admitted, left, re.row(), err
}

// unlock releases the session-level claim lock that readLock took on conn, which is idle. When
// that fails the connection is closed (which releases it): it must never go back to the pool
// holding the lock. It reports whether conn is still open.
func (s *Store) unlock(conn *pgxpool.Conn, lock int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var held bool
	if err := conn.QueryRow(ctx, sqlUnlock, lock).Scan(&held); err != nil || !held {
		closeConn(conn)
		return false
	}
	return true
}

// closeConn closes conn's session; the pool destroys it on Release.
func closeConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Conn().Close(ctx)
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

// isMoved reports an UPDATE or DELETE that met a row a concurrent UPDATE moved to another
// partition (partitioned layout: a lease's expiry moved): SQLSTATE 40001. The record changed
// under us, so our compare-and-swap lost.
func isMoved(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40001"
}

// randomToken returns a positive random int64 for atomic claim ids.
func randomToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1<<32
}
