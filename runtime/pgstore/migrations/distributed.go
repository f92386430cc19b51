package migrations

import (
	"fmt"
	"strings"
)

// Distribution of the plain table's schema on Citus (docs/distributed.md): every idemgen table
// is distributed by scope_id, co-located with the records, so that each statement of a request
// routes to the one shard that holds its scope, and a tenant's records, counters, calls and
// resolutions live on one worker. Citus requires the distribution column in every primary key
// and unique index; the keys below add scope_id in front and keep each constraint's name, so
// that a statement naming it (ON CONFLICT ON CONSTRAINT) finds it under either layout.

// DistributedTable is one table's distribution: its primary key once scope_id is part of it,
// and the indexes it needs once the old primary key no longer serves a lookup.
type DistributedTable struct {
	Table string
	// PrimaryKey is the distributed primary key's columns; the constraint keeps its name,
	// Table + "_pkey".
	PrimaryKey string
	// Indexes are created (IF NOT EXISTS) before the table is distributed: name and columns.
	Indexes [][2]string
}

// CitusTables are the tables Citus distributes, in order: the records first, then the tables
// co-located with them.
var CitusTables = []DistributedTable{
	{Table: "idempotency_records", PrimaryKey: "scope_id, key_id"},
	{Table: "idempotency_scope_usage", PrimaryKey: "scope_id, kind, ends_at, slot"},
	// The call log's old key (provider_key) stays a lookup: reconciliation finds calls by
	// provider key alone (a multi-shard query per batch of report lines).
	{Table: "idempotency_provider_calls", PrimaryKey: "scope_id, provider_key",
		Indexes: [][2]string{{"idempotency_provider_calls_provider_key_idx", "provider_key"}}},
	{Table: "idempotency_resolutions", PrimaryKey: "scope_id, key_id, fencing_token, provider_key"},
	// A key's tombstone lives with its record: the statements that write and read it name both
	// digests and route to the record's shard; the upsert names the key by its constraint.
	{Table: "idempotency_tombstones", PrimaryKey: "scope_id, key_id"},
}

// DistributionColumn is the column every idemgen table is distributed by.
const DistributionColumn = "scope_id"

// CitusSQL returns the SQL that distributes the plain table's schema (SchemaSQL, applied
// first) on a Citus coordinator: for each table of CitusTables, its primary key with scope_id,
// its indexes and create_distributed_table, co-located with idempotency_records. Each step is
// skipped when it is done already, so the script may run again after later migrations; a
// table distributed already is left as it is. pgstore.MigrateDistributed runs the same SQL.
func CitusSQL() string {
	var b strings.Builder
	b.WriteString(`-- Distribution of the idempotency store on Citus (docs/distributed.md): run it on the
-- coordinator after the schema above (idemgen sql), or let pgstore.MigrateDistributed do both.
-- Every table is distributed by scope_id and co-located with idempotency_records; each step
-- is skipped when done already. Co-locate your business tables with the records the same way
-- (create_distributed_table('payments', 'scope_id', colocate_with => 'idempotency_records')).
`)
	for i, t := range CitusTables {
		colocate := ""
		if i > 0 {
			colocate = ", colocate_with => '" + CitusTables[0].Table + "'"
		}
		fmt.Fprintf(&b, `DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '%[1]s'::regclass) THEN
        IF NOT EXISTS (SELECT 1 FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                       WHERE c.conrelid = '%[1]s'::regclass AND c.contype = 'p' AND a.attname = '%[2]s') THEN
            ALTER TABLE %[1]s DROP CONSTRAINT %[1]s_pkey,
                ADD CONSTRAINT %[1]s_pkey PRIMARY KEY (%[3]s);
        END IF;
`, t.Table, DistributionColumn, t.PrimaryKey)
		for _, ix := range t.Indexes {
			fmt.Fprintf(&b, "        CREATE INDEX IF NOT EXISTS %s ON %s (%s);\n", ix[0], t.Table, ix[1])
		}
		fmt.Fprintf(&b, `        PERFORM create_distributed_table('%s', '%s'%s);
    END IF;
END
$$;
`, t.Table, DistributionColumn, colocate)
	}
	return b.String()
}
