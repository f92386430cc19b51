DROP TABLE IF EXISTS idempotency_scope_usage;
DROP TABLE IF EXISTS idempotency_records;
