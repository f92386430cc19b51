-- bench/recordbytes.sql: the bytes one record takes, column by column, in idemgen's table
-- (idempotency_records) and in the floor's copy of it (floor_records, bench/internal/baseline),
-- over the rows a benchmark run left there:
--   psql "$DATABASE_URL" -f bench/recordbytes.sql
-- Column sizes are pg_column_size, averaged over the rows (as stored: a compressed or
-- out-of-line value counts its compressed or pointer size). "row (datum)" is the whole row as
-- a composite value, whose header is a heap tuple header; "header and padding" is that less
-- the columns, which is what each stored row adds besides them (plus a 4-byte line pointer).
-- "heap B/row" and "indexes B/row" are the relations' sizes over the row count (free space
-- included). Only completed records are counted.
\pset footer off
WITH t AS (
  SELECT 'idempotency_records' AS tab, r.*, pg_column_size(r.*) AS whole
  FROM idempotency_records r WHERE response_status <> 0
  UNION ALL
  SELECT 'floor_records', f.*, pg_column_size(f.*) FROM floor_records f
)
SELECT tab AS "table", count(*) AS rows,
  round(avg(pg_column_size(scope_id)), 1) AS scope_id,
  round(avg(pg_column_size(key_id)), 1) AS key_id,
  round(avg(pg_column_size(created_at)), 1) AS created_at,
  round(avg(pg_column_size(expires_at)), 1) AS expires_at,
  round(avg(pg_column_size(locked_until)), 1) AS locked_until,
  round(avg(pg_column_size(fencing_token)), 1) AS fencing_token,
  round(avg(pg_column_size(fingerprint)), 1) AS fingerprint,
  round(avg(pg_column_size(fingerprint_version)), 1) AS fp_version,
  round(avg(pg_column_size(response_status)), 1) AS status,
  round(avg(pg_column_size(body_omitted)), 1) AS omitted,
  round(avg(pg_column_size(operation)), 1) AS operation,
  round(avg(pg_column_size(response_headers)), 1) AS headers,
  round(avg(pg_column_size(response_body)), 1) AS body,
  round(avg(pg_column_size(uncertain)), 1) AS uncertain,
  round(avg(COALESCE(pg_column_size(uncertain_at), 0)), 1) AS uncertain_at,
  round(avg(whole), 1) AS "row (datum)",
  round(avg(whole) - avg(pg_column_size(scope_id) + pg_column_size(key_id) + pg_column_size(created_at)
    + pg_column_size(expires_at) + pg_column_size(locked_until) + pg_column_size(fencing_token)
    + pg_column_size(fingerprint) + pg_column_size(fingerprint_version) + pg_column_size(response_status)
    + pg_column_size(body_omitted) + pg_column_size(operation) + pg_column_size(response_headers)
    + pg_column_size(response_body) + pg_column_size(uncertain) + COALESCE(pg_column_size(uncertain_at), 0)), 1)
    AS "header and padding"
FROM t GROUP BY tab ORDER BY tab;

-- Heap and index bytes per row, over every row (running ones included), partitions summed.
WITH rels AS (
  SELECT 'idempotency_records' AS tab, c.oid FROM pg_class c
  WHERE c.oid = 'idempotency_records'::regclass OR c.oid IN (SELECT relid FROM pg_partition_tree('idempotency_records'))
  UNION
  SELECT 'floor_records', c.oid FROM pg_class c
  WHERE c.oid = 'floor_records'::regclass OR c.oid IN (SELECT relid FROM pg_partition_tree('floor_records'))
), sizes AS (
  SELECT tab, sum(pg_relation_size(oid)) AS heap, sum(pg_indexes_size(oid)) AS idx FROM rels GROUP BY tab
), counts AS (
  SELECT 'idempotency_records' AS tab, count(*) AS n FROM idempotency_records
  UNION ALL SELECT 'floor_records', count(*) FROM floor_records
)
SELECT s.tab AS "table", c.n AS rows, pg_size_pretty(s.heap) AS heap, pg_size_pretty(s.idx) AS indexes,
  round(s.heap::numeric / NULLIF(c.n, 0), 1) AS "heap B/row", round(s.idx::numeric / NULLIF(c.n, 0), 1) AS "indexes B/row"
FROM sizes s JOIN counts c USING (tab) ORDER BY s.tab;
