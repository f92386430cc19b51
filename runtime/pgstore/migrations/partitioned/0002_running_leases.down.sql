DROP INDEX IF EXISTS idempotency_records_running_idx;
