DROP TABLE IF EXISTS idempotency_records;
