package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// Paired is a Redis lease store joined with a database store (db, e.g. *pgstore.Store, or a
// Cache in front of one), for services whose lease-mode handlers complete by writing rows in a
// database transaction, as idemgen's generated lease handlers do. It implements
// store.Transactional[DB]:
//
//   - lease mode: claims, takeovers, heartbeats and replays are Redis's (the Store's scripts);
//   - the completion (BeginCompletion, Commit): the lease is extended in Redis under the token,
//     then the handler's rows and the completed record are written in ONE database transaction
//     (db's atomic-mode claim: the record's primary key admits one completion per key), and
//     only after that commit is the record completed in Redis;
//   - atomic mode and requests without a key (BeginAtomic, BeginPlain) are db's.
//
// The database is the authority on completions. Order and crash trade-off: a crash (or a Redis
// failure) after the database commit and before Redis is completed leaves the Redis record
// running; duplicates get 409 until its lease ends, and the takeover that follows finds the
// completed record in the database, copies it to Redis and answers it (a replay): the handler
// does not run again. The other order (Redis first) would let a crash replay a response whose
// rows never committed, so it is not used.
//
// A new claim in Redis also reads the database once (one indexed read) before it is granted:
// when Redis lost a record (a failover, a restart without AOF) or the key was used by an
// atomic-mode operation, the database's record answers and is copied to Redis, so the
// handler's call phase (its provider call) does not run again. What Redis durability can still
// cost is a claim lost while its call phase runs: a duplicate then runs the call phase too,
// under the same Lease.ProviderKey, and only one of the two completions commits (the other is
// answered from it). docs/redis.md has the details.
//
// Not supported: a key used concurrently by a lease-mode and an atomic-mode operation (they
// meet only at the completion's commit, after the lease-mode call phase ran); running lease
// records written into db by pgstore's own lease mode (they are answered, never taken over).
type Paired[DB any] struct {
	r  *Store
	db store.Transactional[DB]
}

var _ store.Transactional[struct{}] = (*Paired[struct{}])(nil)

// completionLease is how far a completion extends a lease whose claim had none.
const completionLease = 30 * time.Second

// cleanupTimeout bounds the best-effort Redis calls made after the caller's context ended.
const cleanupTimeout = 2 * time.Second

// Pair joins the lease store r with the database store db. It panics when either is nil.
func Pair[DB any](r *Store, db store.Transactional[DB]) *Paired[DB] {
	if r == nil || db == nil {
		panic("redisstore: Pair needs a Redis store and a database store")
	}
	return &Paired[DB]{r: r, db: db}
}

// Get returns the key's live record: Redis's, else the database's.
func (p *Paired[DB]) Get(ctx context.Context, id store.ID) (store.Record, bool, error) {
	rec, found, err := p.r.Get(ctx, id)
	if err != nil || found {
		return rec, found, err
	}
	return p.db.Get(ctx, id)
}

// Reserve claims the key in Redis; a new claim is granted only when the database has no live
// record for the key either (otherwise that record is copied to Redis and returned).
func (p *Paired[DB]) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	res, err := p.r.Reserve(ctx, c)
	if err != nil || !res.Claimed() {
		return res, err
	}
	// The database's record, if any; a new claim is counted against the tenant's limits
	// there (store.Admitter), so the same caps hold as on the database alone.
	var rec store.Record
	var found bool
	if a, ok := p.db.(store.Admitter); ok {
		rec, found, err = a.Admit(ctx, c)
	} else {
		rec, found, err = p.db.Get(ctx, c.ID)
	}
	var limited *store.LimitError
	if errors.As(err, &limited) {
		p.release(ctx, c.ID, res.Token)
		return store.Reservation{}, err
	}
	if err != nil {
		p.release(ctx, c.ID, res.Token)
		return store.Reservation{}, fmt.Errorf("redisstore: read the database's record: %w", err)
	}
	if !found {
		return res, nil
	}
	if !p.settle(ctx, c.ID, res.Token, &rec) {
		p.release(ctx, c.ID, res.Token)
	}
	return store.Reservation{Record: rec}, nil
}

// TakeOver takes the Redis claim over from token old, unless the database holds a live record
// of the key (a completion whose Redis update was lost): that record is copied to Redis and
// TakeOver answers store.ErrLost, so the runtime looks again and replays it.
func (p *Paired[DB]) TakeOver(ctx context.Context, c store.Claim, old int64) (int64, error) {
	rec, found, err := p.db.Get(ctx, c.ID)
	if err != nil {
		return 0, fmt.Errorf("redisstore: read the database's record: %w", err)
	}
	if found {
		p.settle(ctx, c.ID, old, &rec)
		return 0, store.ErrLost
	}
	return p.r.TakeOver(ctx, c, old)
}

// Extend moves the Redis lease; see Store.Extend.
func (p *Paired[DB]) Extend(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	return p.r.Extend(ctx, id, token, d)
}

// Complete completes the record held under token with resp and no rows of the handler's: the
// completed record is committed in the database, then in Redis (BeginCompletion and Commit).
func (p *Paired[DB]) Complete(ctx context.Context, c store.Claim, token int64, resp store.Response) error {
	rec, found, err := p.r.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	if !found || rec.State != store.Running || rec.Token != token {
		return store.ErrLost
	}
	tx, err := p.BeginCompletion(ctx, store.Claim{ID: c.ID, Tenant: c.Tenant, Operation: rec.Operation, Fingerprint: rec.Fingerprint,
		Retention: c.Retention, Tombstone: c.Tombstone, Calls: true}, token)
	if err != nil {
		var done *store.CompletedError
		if errors.As(err, &done) {
			return store.ErrLost // another request's completion holds the key
		}
		return err
	}
	tx.HandlerContext(ctx)
	if err := tx.Commit(ctx, resp); err != nil {
		var done *store.CompletedError
		if errors.As(err, &done) {
			return store.ErrLost
		}
		return err
	}
	return nil
}

// Release deletes the Redis record held under token, and marks its calls released in the
// database's call log (store.CallLog).
func (p *Paired[DB]) Release(ctx context.Context, id store.ID, token int64) error {
	if err := p.r.Release(ctx, id, token); err != nil {
		return err
	}
	if l, ok := p.db.(store.CallLog); ok {
		return l.ReleaseCalls(ctx, id)
	}
	return nil
}

// BeginCall records the call in the Redis record held under token (store.ErrLost when the token
// no longer holds it), then in the database's call log (store.CallLog), where reconciliation
// reads it.
func (p *Paired[DB]) BeginCall(ctx context.Context, c store.Claim, token int64, call store.Call) error {
	if err := p.r.BeginCall(ctx, c, token, call); err != nil {
		return err
	}
	if l, ok := p.db.(store.CallLog); ok {
		if err := l.LogCall(ctx, c, token, call); err != nil {
			return fmt.Errorf("redisstore: log the call in the database: %w", err)
		}
	}
	return nil
}

// MarkUncertain marks the Redis record; see Store.MarkUncertain.
func (p *Paired[DB]) MarkUncertain(ctx context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	return p.r.MarkUncertain(ctx, id, token, reason)
}

// BeginAtomic is db's (atomic-mode records live in the database).
func (p *Paired[DB]) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[DB], *store.Record, error) {
	return p.db.BeginAtomic(ctx, c)
}

// BeginPlain is db's.
func (p *Paired[DB]) BeginPlain(ctx context.Context) (store.Tx[DB], error) {
	return p.db.BeginPlain(ctx)
}

// BeginCompletion opens the completion of the Redis claim held under token: it extends the
// lease to at least c.Lease (30s when zero) from now, so that no takeover starts while the
// completion runs
// (store.ErrLost when the token no longer holds), then opens db's atomic-mode claim of the key,
// in whose transaction the handler writes and the completed record is inserted at Commit. A
// live record already in the database answers as a *store.CompletedError (and is copied to
// Redis); a concurrent claim in the database is store.ErrBusy.
func (p *Paired[DB]) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[DB], error) {
	d := c.Lease
	if d <= 0 {
		d = completionLease
	}
	if err := p.r.extendAtLeast(ctx, c.ID, token, d); err != nil {
		return nil, err
	}
	dc := c
	dc.Lease, dc.Wait = 0, 0
	if _, ok := p.db.(store.Admitter); ok {
		dc.Counted = true // at Reserve
	}
	tx, rec, err := p.db.BeginAtomic(ctx, dc)
	switch {
	case err != nil:
		// The Redis claim stays: its lease ends and the retry's takeover finds out.
		return nil, err
	case rec != nil && rec.State == store.Completed:
		p.settle(ctx, c.ID, token, rec)
		return nil, &store.CompletedError{Record: *rec}
	case rec != nil && rec.State == store.Expired:
		// The database remembers the key (a tombstone): the request ran before.
		return nil, &store.CompletedError{Record: *rec}
	case rec != nil:
		return nil, store.ErrBusy
	}
	return &pairedTx[DB]{Tx: tx, p: p, claim: c, token: token}, nil
}

// settle turns the Redis record running under token into rec, a live completed record of the
// database, for rec's remaining retention; false when it did not (rec not completed or its
// retention unknown, the token no longer holds, or Redis failed: the next request repairs).
func (p *Paired[DB]) settle(ctx context.Context, id store.ID, token int64, rec *store.Record) bool {
	if rec.State != store.Completed || rec.RetentionLeft <= 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// The database keeps the record's tombstone: Redis's copy needs none (a key Redis no
	// longer has is looked up in the database).
	return p.r.complete(ctx, id, token, rec, nil, store.Claim{Retention: rec.RetentionLeft}) == nil
}

// release frees the Redis claim held under token, best effort (it ends with its lease anyway).
func (p *Paired[DB]) release(ctx context.Context, id store.ID, token int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = p.r.Release(ctx, id, token)
}

// pairedTx is the database transaction of a lease-mode completion: Commit commits it (the
// handler's rows and the completed record), then completes the Redis record.
type pairedTx[DB any] struct {
	store.Tx[DB]
	p     *Paired[DB]
	claim store.Claim
	token int64
	kept  *store.Response
}

// Kept returns what the database kept at Commit (store.Kept).
func (t *pairedTx[DB]) Kept() (store.Response, bool) {
	if t.kept == nil {
		return store.Response{}, false
	}
	return *t.kept, true
}

func (t *pairedTx[DB]) Commit(ctx context.Context, resp store.Response) error {
	err := t.Tx.Commit(ctx, resp)
	var done *store.CompletedError
	switch {
	case err == nil:
		// The database has the completion; a Redis failure here is repaired by the takeover
		// that follows the lease (see Paired), so the request has succeeded either way. Redis
		// gets what the database kept (its per-scope caps may have omitted the body).
		resp = store.KeptResponse(t.Tx, resp)
		t.kept = &resp
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = t.p.r.Complete(cctx, t.claim, t.token, resp)
		cancel()
		return nil
	case errors.As(err, &done):
		t.p.settle(ctx, t.claim.ID, t.token, &done.Record)
	}
	return err
}

func (t *pairedTx[DB]) Abort(ctx context.Context) error {
	err := t.Tx.Abort(ctx)
	var done *store.CompletedError
	if errors.As(err, &done) {
		t.p.settle(ctx, t.claim.ID, t.token, &done.Record)
		return err
	}
	t.p.release(ctx, t.claim.ID, t.token)
	return err
}
