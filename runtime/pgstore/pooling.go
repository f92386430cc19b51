package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the store's deployment check: what sits between the pool and PostgreSQL (a
// connection pooler that pools transactions, such as PgBouncer's pool_mode=transaction), what
// cannot work there, and whether the pool is large enough for the expected concurrency. New
// trusts Options.Pooling; Open asks the server and answers with an error instead of a store
// that fails requests later (docs/runtime.md, "Behind a connection pooler").

// Pooling says how the pool's connections reach PostgreSQL, as far as the store must know:
// whether one connection of the pool is one server session for its whole life.
type Pooling uint8

const (
	// PoolingDetect (the zero value): Open finds out (a pooler in between is taken to pool
	// transactions unless told otherwise); New takes it as PoolingSession.
	PoolingDetect Pooling = iota
	// PoolingSession: each connection of the pool is one PostgreSQL session for its life: a
	// direct connection, or a pooler that pools sessions (PgBouncer's pool_mode=session).
	PoolingSession
	// PoolingTransaction: a pooler may run each transaction, and each statement outside one,
	// on another server session, shared with other clients: PgBouncer's
	// pool_mode=transaction, and poolers that work the same way (Supavisor and Odyssey in
	// transaction mode). The store then keeps no state in a session: it refuses
	// ClaimWithStatement.LockAtRead (a session-level lock), never prepares a statement by name,
	// and needs a statement mode that does not either (default_query_exec_mode=exec,
	// cache_describe or simple_protocol).
	PoolingTransaction
)

// String returns the constant's name.
func (p Pooling) String() string {
	switch p {
	case PoolingDetect:
		return "PoolingDetect"
	case PoolingSession:
		return "PoolingSession"
	case PoolingTransaction:
		return "PoolingTransaction"
	}
	return fmt.Sprintf("Pooling(%d)", uint8(p))
}

// Open checks opts and pool against the server and returns the store, as New does, or an error
// that names the setting to change, so that a store that cannot work fails at start-up and not
// at its first request. Call it once at start, after Migrate. It learns at once which engine
// the pool's database is (one look at its catalog: a single PostgreSQL, or Citus with the
// records distributed by MigrateDistributed) and what sits in between. It fails when:
//   - opts contradict each other (where New panics: Partitioned with NoAdvisoryLocks);
//   - the server cannot be reached (the database's error);
//   - an option cannot work on the engine (an error wrapping ErrUnsupported, with the reason);
//   - the connections go through a pooler that pools transactions (Options.Pooling, or
//     detected: the session's process id differs from the one the connection announced, which a
//     pooler makes up) and opts or the pool need a session of their own:
//     ClaimWithStatement.LockAtRead, or a statement mode that prepares statements by name or
//     describes them in a round trip of their own (pgx's default cache_statement, and
//     describe_exec; set default_query_exec_mode=exec in the connection string).
//
// A pooler detected with opts.Pooling left at PoolingDetect is taken to pool transactions, as
// most fleets run PgBouncer (logged at Info); set PoolingSession when it pools sessions. Open
// also warns (Options.Logger) when the pool cannot hold Options.Concurrency handlers besides
// the connections reserved for lookups, with the pool_max_conns to set.
func Open(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Pooling == PoolingDetect {
		proxied, err := behindPooler(ctx, pool)
		if err != nil {
			return nil, fmt.Errorf("pgstore: open: %w", err)
		}
		opts.Pooling = PoolingSession
		if proxied {
			opts.Pooling = PoolingTransaction
			log.Info("pgstore: a connection pooler is between the pool and PostgreSQL (the session's process id is not the one the connection announced); "+
				"the store keeps no session state, as transaction pooling needs: set Options.Pooling to PoolingSession if the pooler pools sessions (PgBouncer pool_mode=session)",
				"pooling", opts.Pooling.String())
		}
	}
	if err := checkPooling(pool, opts); err != nil {
		return nil, err
	}
	s := New(pool, opts)
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if msg, attrs := s.poolAdvice(); msg != "" {
		log.Warn(msg, attrs...)
	}
	return s, nil
}

// checkOptions is the contradictions among opts that New panics on.
func checkOptions(opts Options) error {
	if opts.Partitioned && opts.NoAdvisoryLocks {
		return errors.New("pgstore: the partitioned layout needs advisory locks (Options.NoAdvisoryLocks)")
	}
	return nil
}

// checkPooling refuses, behind a pooler that pools transactions, what needs a session of its
// own.
func checkPooling(pool *pgxpool.Pool, opts Options) error {
	if opts.Pooling != PoolingTransaction {
		return nil
	}
	if c, ok := opts.Claim.(ClaimWithStatement); ok && c.LockAtRead {
		return errors.New("pgstore: ClaimWithStatement.LockAtRead takes a session-level lock, which a pooler that pools transactions " +
			"(Options.Pooling = PoolingTransaction; PgBouncer pool_mode=transaction) leaves on a server session other clients then use: " +
			"set LockAtRead to false, or Options.Pooling to PoolingSession if the pooler pools sessions")
	}
	switch mode := pool.Config().ConnConfig.DefaultQueryExecMode; mode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec:
		return fmt.Errorf("pgstore: the pool's statement mode %s %s, which a pooler that pools transactions "+
			"(Options.Pooling = PoolingTransaction; PgBouncer pool_mode=transaction) may send to another server session: "+
			"set default_query_exec_mode=exec in the connection string (or pgxpool.Config.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec; "+
			"cache_describe and simple_protocol work too)", execModeName(mode), execModeNeeds(mode))
	}
	return nil
}

// execModeName is the connection string's name of a pgx statement mode.
func execModeName(m pgx.QueryExecMode) string {
	switch m {
	case pgx.QueryExecModeCacheStatement:
		return "cache_statement"
	case pgx.QueryExecModeCacheDescribe:
		return "cache_describe"
	case pgx.QueryExecModeDescribeExec:
		return "describe_exec"
	case pgx.QueryExecModeExec:
		return "exec"
	case pgx.QueryExecModeSimpleProtocol:
		return "simple_protocol"
	}
	return m.String()
}

// execModeNeeds says what a statement mode keeps in the session.
func execModeNeeds(m pgx.QueryExecMode) string {
	if m == pgx.QueryExecModeCacheStatement {
		return "(pgx's default) prepares each statement by name once per connection and then runs it by that name"
	}
	return "describes each statement in a round trip of its own and runs it in the next"
}

// behindPooler reports whether pool's connections go through a pooler: the backend process id
// the server reports differs from the one the connection announced at startup (BackendKeyData),
// which poolers make up for their clients.
func behindPooler(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire: %w", err)
	}
	defer conn.Release()
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false, fmt.Errorf("read the session's process id: %w", err)
	}
	return pid != conn.Conn().PgConn().PID(), nil
}

// poolAdvice is the warning Open logs about the pool's size, with its attributes; "" when there
// is none. The handlers the pool can run at once are its MaxConns less ReservedConns; a new key
// beyond them waits for a slot, and after the runtime's StoreTimeout gets 503.
func (s *Store) poolAdvice() (string, []any) {
	cfg := s.pool.Config()
	maxConns := int(cfg.MaxConns)
	handlers := s.slots.capacity
	reserved := maxConns - handlers
	if s.opts.Concurrency > 0 {
		if s.opts.Concurrency <= handlers {
			return "", nil
		}
		want := s.opts.Concurrency + reserved
		return fmt.Sprintf("pgstore: the pool runs at most %d handlers at once (pool_max_conns %d less %d reserved for lookups), below Options.Concurrency %d: "+
				"set pool_max_conns=%d in the connection string (pgxpool.Config.MaxConns)", handlers, maxConns, reserved, s.opts.Concurrency, want),
			[]any{"max_conns", maxConns, "reserved", reserved, "concurrency", s.opts.Concurrency, "want_max_conns", want}
	}
	if strings.Contains(cfg.ConnString(), "pool_max_conns") || maxConns != max(4, goruntime.NumCPU()) {
		return "", nil // sized on purpose
	}
	return fmt.Sprintf("pgstore: the pool has pgxpool's default size, %d connections (the larger of 4 and the CPUs), so at most %d handlers run at once "+
			"(%d connections are reserved for lookups): set Options.Concurrency to the requests you expect at once, and pool_max_conns in the connection string to that plus %d",
			maxConns, handlers, reserved, reserved),
		[]any{"max_conns", maxConns, "reserved", reserved}
}
