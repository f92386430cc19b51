DROP FUNCTION IF EXISTS idempotency_key_taken(bigint, uuid);
