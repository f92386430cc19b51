package pgstore

import "context"

// WaitingForTest returns how many duplicates wait for a concurrent claim of their key in s
// (store.Claim.Wait), for the tests of package pgstore_test.
func (s *Store) WaitingForTest() int { return s.waiting.count() }

// MarkPartitionForTest returns the statement that marks table as a partition of the
// PartitionSweeper's own.
func MarkPartitionForTest(table string) string { return markPartition(table) }

// SlotsForTest returns how many handler slots are held and how many requests wait in line for
// one, for the tests of package pgstore_test.
func (s *Store) SlotsForTest() (held, waiting int) {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	for _, n := range s.slots.held {
		held += n
	}
	return held, len(s.slots.line)
}

// ReadsForTest returns the reads a key's lookup may make, by name, with the number of
// arguments each takes after scope_id and key_id (the claim lock, the tenant, the interval,
// the cap), for the tests of package pgstore_test.
func (s *Store) ReadsForTest() map[string]string {
	return map[string]string{"read": s.q.read, "readProbe": s.q.readProbe, "readCharged": s.q.readCharged, "readProbeCharged": s.q.readProbeCharged}
}

// ClaimLockForTest returns the statement by which a claim takes its key's claim locks ($1, the
// lock key) and learns whether they are ours.
func (s *Store) ClaimLockForTest() string { return s.q.lockOnly[lockTry] }

// LockReadsForTest returns the reads of ClaimWithStatement.LockAtRead (readLock, readLockCharged
// and, on a schema without idempotency_key_taken, readLocked) once the store knows its
// database, for the tests of package pgstore_test.
func (s *Store) LockReadsForTest(ctx context.Context) (map[string]string, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return map[string]string{"readLock": s.q.readLock, "readLockCharged": s.q.readLockCharged, "readLocked": s.q.readLocked}, nil
}
