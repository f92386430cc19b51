DROP TABLE IF EXISTS idempotency_resolutions;
DROP TABLE IF EXISTS idempotency_provider_calls;
ALTER TABLE idempotency_records DROP COLUMN IF EXISTS uncertain_at;
ALTER TABLE idempotency_records DROP COLUMN IF EXISTS uncertain;
