package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The store adapts to the database it runs on (docs/distributed.md): a single PostgreSQL, or a
// Citus coordinator whose idempotency_records table is distributed (MigrateDistributed). It
// learns which at its first operation (Open: at once), from the catalog, and each difference
// is a field of the engine row below, not a branch spread through the statements.

// engine is what the store needs to know of its database.
type engine struct {
	// name says which engine, in messages ("PostgreSQL", "Citus 13.2.2").
	name string
	// citus: idempotency_records is a Citus distributed table. Then a statement that names a
	// record's scope is routed to the worker holding its shard and pushed down whole, so:
	//   - the claim lock is taken where the record's read takes it, on that worker: its
	//     statements name a column of the record's row (routeLock), which keeps Citus from
	//     evaluating them on the coordinator;
	//   - a lock wait is set with SET LOCAL, which Citus propagates to the workers of the
	//     transaction (citus.propagate_set_commands = 'local', itself set for the transaction
	//     only), where the waits happen; set_config() would set the coordinator's only;
	//   - no session-level lock (ClaimWithStatement.LockAtRead): it would be held by a worker's
	//     backend that the coordinator's session cannot release;
	//   - not the partitioned layout, which is for a single PostgreSQL;
	//   - the sweepers delete without FOR UPDATE SKIP LOCKED (Sweeper.Portable), which Citus
	//     refuses across shards;
	//   - the stored bytes are the shards' (citus_total_relation_size), not the coordinator's
	//     empty shell table's.
	citus bool
	// keyTaken: the schema has idempotency_key_taken (migration 0006; 0005 partitioned), with
	// which ClaimWithStatement.LockAtRead's read re-reads a new key under its lock in the same
	// statement (statements.readLock). Without it (a replica that runs before the migration, a
	// schema managed by hand and not yet upgraded) the re-read is a second statement in the
	// read's round trip, as before the migration.
	keyTaken bool
}

// plainPostgres is the engine of a database without a distributed records table.
var plainPostgres = engine{name: "PostgreSQL"}

// sqlCitus is the citus extension's version (NULL without it) and whether the schema has
// idempotency_key_taken (engine.keyTaken); sqlDistributed, asked only with the extension (its
// catalog and function exist only then), Citus's version and whether idempotency_records is
// distributed.
const (
	sqlCitus = `SELECT (SELECT extversion FROM pg_extension WHERE extname = 'citus'),
	to_regprocedure('idempotency_key_taken(bigint, uuid)') IS NOT NULL`
	sqlDistributed = `SELECT split_part(citus_version(), ' ', 2),
	EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('idempotency_records'))`
)

// detectEngine asks the catalog which engine q's database is.
func detectEngine(ctx context.Context, q querier) (engine, error) {
	var (
		version  *string
		keyTaken bool
	)
	if err := q.QueryRow(ctx, sqlCitus).Scan(&version, &keyTaken); err != nil {
		return engine{}, fmt.Errorf("detect the database engine: %w", err)
	}
	plain := plainPostgres
	plain.keyTaken = keyTaken
	if version == nil {
		return plain, nil
	}
	var distributed bool
	if err := q.QueryRow(ctx, sqlDistributed).Scan(&version, &distributed); err != nil {
		return engine{}, fmt.Errorf("detect the database engine: %w", err)
	}
	if !distributed {
		// The extension without a distributed records table: the table is the coordinator's
		// own, a plain PostgreSQL table.
		return plain, nil
	}
	return engine{name: "Citus " + *version, citus: true, keyTaken: keyTaken}, nil
}

// refuse returns why opts cannot work on e, or nil. The store answers every operation with it.
func (e engine) refuse(opts Options) error {
	var why []string
	if e.citus {
		if opts.Partitioned {
			why = append(why, "Options.Partitioned: the layout partitioned by expiry is for a single PostgreSQL (use Migrate's plain table, distributed by MigrateDistributed)")
		}
		if c, ok := opts.Claim.(ClaimWithStatement); ok && c.LockAtRead {
			why = append(why, "ClaimWithStatement.LockAtRead: its session-level claim lock would be held on the worker that holds the record's shard, where the coordinator's session cannot release it (use ClaimWithStatement without it)")
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("pgstore: %s on %s: %w", strings.Join(why, "; "), e.name, ErrUnsupported)
}

// ErrUnsupported is returned (wrapped, with the reason) by Open, and by every operation of a
// Store made with New, when an option cannot work on the database's engine: on Citus, the
// partitioned layout and ClaimWithStatement.LockAtRead (docs/distributed.md).
var ErrUnsupported = errors.New("not supported on this database")

// routeLock is the SQL expression that takes the claim lock (lock, an expression of its key)
// within a statement that reads the record's row as r: it names a column of r, so that on Citus
// the expression travels with the routed statement to the worker holding the record's shard
// (an expression without a column is evaluated on the coordinator), which is where the read
// that probes the key takes the lock too. On PostgreSQL it is the same lock.
func routeLock(lock string) string {
	return `CASE WHEN r.key_id IS NULL THEN ` + lock + ` ELSE ` + lock + ` END`
}

// routedFrom is the FROM clause that gives a lock statement the record's row as r (none when
// the key has no record: one row either way), for the scope and key parameters given.
func routedFrom(scope, key string) string {
	return ` FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.key_id = ` + key + ` AND r.scope_id = ` + scope
}

// resolveTimeout bounds Open's and the first operation's look at the catalog.
const resolveTimeout = 10 * time.Second
