-- idemgen idempotency store, version 2.
-- Running lease-mode claims (response_status 0) by the end of their lease. The sweeper counts
-- the claims whose lease has ended (stale running records, a monitoring gauge) through this
-- index instead of reading the whole table. Only running rows enter it (completed records never
-- do), so it stays small.
CREATE INDEX IF NOT EXISTS idempotency_records_running_idx
    ON idempotency_records (locked_until) WHERE response_status = 0;
