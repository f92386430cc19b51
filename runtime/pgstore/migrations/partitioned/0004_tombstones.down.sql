ALTER TABLE idempotency_records DROP COLUMN IF EXISTS forget_at;
DROP TABLE IF EXISTS idempotency_tombstones;
