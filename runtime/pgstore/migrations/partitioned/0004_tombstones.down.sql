DROP TABLE IF EXISTS idempotency_tombstones;
