package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/runtime/store"
)

// CacheOptions configures a Cache. Zero values take the defaults stated on each field.
type CacheOptions struct {
	// Prefix starts the name of every key the cache writes; default "idemgen:replay:". It must
	// not contain '{' or '}'.
	Prefix string
	// Timeout bounds every Redis call of the cache (a lookup, a write); default 250ms. A call
	// that fails or runs out of time is a miss: the database answers. Keep it well above the
	// Redis latency of an overloaded process (goroutines wait for a core too): a timeout that
	// trips under load moves the load to the database when it can least take it.
	Timeout time.Duration
	// Backoff is how long the cache leaves Redis alone after a failed call (every request goes
	// to the database meanwhile, without waiting for Redis); default 1s.
	Backoff time.Duration
	// ClockMargin is how much earlier than its record a cached copy expires; default 1s. The
	// copy's expiry is counted on Redis's clock from a moment before the database read (or
	// commit) that told the record's remaining retention, so it cannot outlive the record while
	// the clocks run at the same rate; the margin covers a clock stepped back and a failover to
	// a Redis node whose clock is behind. Set it to a negative value for no margin.
	ClockMargin time.Duration
	// LocalBytes is the memory budget of the in-process tier, in bytes (record bytes plus a
	// fixed overhead per entry); 0: no in-process tier. Each process then serves the records it
	// has seen recently from its own memory, without a Redis round trip.
	LocalBytes int64
	// LocalMaxAge bounds how long the in-process tier keeps a copy before asking Redis again
	// (besides the record's own expiry); default 1m. It bounds how long another process keeps
	// replaying a record deleted by hand (Forget).
	LocalMaxAge time.Duration
}

// Cache is a replay cache in front of a database store (inner, e.g. *pgstore.Store): it
// implements store.Transactional[DB] by delegating to inner, and serves completed records
// without inner:
//
//   - a lookup (BeginAtomic, Reserve, Get) asks the in-process tier, then Redis; a completed
//     record found there answers (replay, or 422 when the request differs) and inner is not
//     called;
//   - on a miss inner answers, and a completed record it returns is written to Redis (and the
//     in-process tier) with the record's remaining retention as its lifetime (read-through);
//   - a transaction that commits a response writes the new completed record after the commit.
//
// A record kept from a commit carries the request's token in lease mode and 0 in atomic mode
// (the database's claim id is not returned to the cache); the runtime never reads the token of
// a completed record.
//
// Only completed records are cached: they do not change until they expire. Running lease
// records and claims are never cached, so a copy can never answer for a request in flight, and
// a copy always expires before its record (see CacheOptions.ClockMargin), so it can never
// answer for a key that has become new again. Redis down, slow (CacheOptions.Timeout) or
// returning something unreadable is a miss: inner answers; the cache never returns a Redis
// error. A record deleted from the database by hand must be removed from the cache too
// (Forget).
//
// It holds no global state and is safe for concurrent use.
type Cache[DB any] struct {
	inner   store.Transactional[DB]
	c       rueidis.Client
	prefix  string
	timeout time.Duration
	backoff time.Duration
	margin  time.Duration
	maxAge  time.Duration
	local   *localTier
	// base is the origin of nanos, this cache's monotonic clock.
	base time.Time
	// downUntil is when (nanos) the cache may use Redis again after a failure.
	downUntil atomic.Int64
	stats     cacheCounters
}

var _ store.Transactional[struct{}] = (*Cache[struct{}])(nil)

// CacheCounters counts what a Cache did since it was made (Cache.Counters).
type CacheCounters struct {
	// LocalHits, RedisHits: lookups answered by the in-process tier, by Redis.
	LocalHits, RedisHits int64
	// Misses: lookups that went to the database store (no copy, Redis skipped after a failure,
	// or an unreadable copy).
	Misses int64
	// Writes: completed records written to Redis.
	Writes int64
	// Errors: Redis calls that failed or ran out of time (each one turns Redis off for
	// CacheOptions.Backoff).
	Errors int64
}

type cacheCounters struct {
	localHits, redisHits, misses, writes, errors atomic.Int64
}

// NewCache returns the replay cache of inner on client. It panics when opts.Prefix contains a
// brace or when inner or client is nil (a programming error, found at start-up).
func NewCache[DB any](inner store.Transactional[DB], client rueidis.Client, opts CacheOptions) *Cache[DB] {
	if opts.Prefix == "" {
		opts.Prefix = "idemgen:replay:"
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		panic(err)
	}
	if inner == nil || client == nil {
		panic("redisstore: NewCache needs a store and a client")
	}
	c := &Cache[DB]{
		inner: inner, c: client, prefix: opts.Prefix,
		timeout: orDefault(opts.Timeout, 250*time.Millisecond),
		backoff: orDefault(opts.Backoff, time.Second),
		margin:  orDefault(opts.ClockMargin, time.Second),
		maxAge:  orDefault(opts.LocalMaxAge, time.Minute),
		base:    time.Now(),
	}
	c.margin = max(c.margin, 0)
	if opts.LocalBytes > 0 {
		c.local = newLocalTier(opts.LocalBytes)
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Inner returns the store the cache is in front of.
func (c *Cache[DB]) Inner() store.Transactional[DB] { return c.inner }

// Counters returns the cache's counters.
func (c *Cache[DB]) Counters() CacheCounters {
	return CacheCounters{LocalHits: c.stats.localHits.Load(), RedisHits: c.stats.redisHits.Load(),
		Misses: c.stats.misses.Load(), Writes: c.stats.writes.Load(), Errors: c.stats.errors.Load()}
}

// nanos is the cache's monotonic clock: nanoseconds since it was made.
func (c *Cache[DB]) nanos() int64 { return int64(time.Since(c.base)) }

func (c *Cache[DB]) redisUp() bool { return c.nanos() >= c.downUntil.Load() }

// failed turns Redis off for the backoff, unless the caller's own context ended (a client that
// went away says nothing about Redis).
func (c *Cache[DB]) failed(parent context.Context) {
	if parent.Err() != nil {
		return
	}
	c.stats.errors.Add(1)
	c.downUntil.Store(c.nanos() + int64(c.backoff))
}

// anchor is what a lookup learnt of the clocks, for the copies written after it: the Redis
// server's clock when it ran (µs; 0 when Redis was not asked or did not answer).
type anchor struct{ redisUS int64 }

// lookup returns a cached completed record of id, or nil and the anchor for a later write.
// A hit costs one round trip (GET and PTTL pipelined); a miss one more, for the anchor.
func (c *Cache[DB]) lookup(ctx context.Context, id store.ID) (*store.Record, anchor) {
	if c.local != nil {
		if rec, ok := c.local.get(id, c.nanos()); ok {
			c.stats.localHits.Add(1)
			return &rec, anchor{}
		}
	}
	if !c.redisUp() {
		c.stats.misses.Add(1)
		return nil, anchor{}
	}
	key := keyName(c.prefix, id)
	sent := c.nanos()
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res := c.c.DoMulti(rctx, c.c.B().Get().Key(key).Build(), c.c.B().Pttl().Key(key).Build())
	v, err := res[0].AsBytes()
	if rueidis.IsRedisNil(err) {
		c.stats.misses.Add(1)
		return nil, c.clock(ctx, rctx, key)
	}
	pttl, err2 := res[1].AsInt64()
	if err != nil || err2 != nil {
		if res[0].NonRedisError() != nil || res[1].NonRedisError() != nil {
			c.failed(ctx)
			c.stats.misses.Add(1)
			return nil, anchor{}
		}
		c.stats.misses.Add(1)
		return nil, c.clock(ctx, rctx, key)
	}
	rec, err := decodeRecord(v)
	if err != nil || pttl <= 0 {
		c.stats.misses.Add(1)
		return nil, c.clock(ctx, rctx, key)
	}
	left := time.Duration(pttl) * time.Millisecond
	rec.RetentionLeft = left
	if c.local != nil {
		// The copy in Redis expires pttl after PTTL ran, which was after sent.
		c.local.put(id, &rec, sent+int64(min(left, c.maxAge)))
	}
	c.stats.redisHits.Add(1)
	return &rec, anchor{}
}

// clock returns an anchor from the clock of the node that owns key (rctx bounds the call), or
// none when Redis does not answer (ctx is the caller's).
func (c *Cache[DB]) clock(ctx, rctx context.Context, key string) anchor {
	t, err := scriptClock.Exec(rctx, c.c, []string{key}, nil).AsIntSlice()
	if err != nil || len(t) != 2 {
		if err != nil {
			c.failed(ctx)
		}
		return anchor{}
	}
	return anchor{redisUS: t[0]*1_000_000 + t[1]}
}

// keep writes a completed record to the tiers: left is its remaining retention as the database
// counted it, from a moment after start (nanos, taken before the database call) and after the
// lookup that gave at.
func (c *Cache[DB]) keep(ctx context.Context, id store.ID, rec *store.Record, at anchor, start int64, left time.Duration) {
	if rec == nil || rec.State != store.Completed {
		return
	}
	left -= c.margin
	if left <= 0 {
		return
	}
	if c.local != nil {
		c.local.put(id, rec, start+int64(min(left, c.maxAge)))
	}
	if at.redisUS == 0 || !c.redisUp() {
		return
	}
	// PXAT, on Redis's clock, from the lookup's TIME: the record was counted from later.
	pxat := (at.redisUS + left.Microseconds()) / 1000
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := c.c.B().Set().Key(keyName(c.prefix, id)).Value(rueidis.BinaryString(encodeRecord(rec))).PxatMillisecondsTimestamp(pxat).Build()
	if err := c.c.Do(rctx, cmd).Error(); err != nil {
		c.failed(ctx)
		return
	}
	c.stats.writes.Add(1)
}

// keepCompleted keeps the record of a *store.CompletedError that err may be.
func (c *Cache[DB]) keepCompleted(ctx context.Context, id store.ID, err error, at anchor, start int64) {
	var done *store.CompletedError
	if errors.As(err, &done) {
		c.keep(ctx, id, &done.Record, at, start, done.Record.RetentionLeft)
	}
}

// Forget removes the cached copy of id from Redis and from this process's in-process tier
// (other processes keep theirs up to CacheOptions.LocalMaxAge). Call it after deleting a record
// from the database by hand. Errors are Redis's.
func (c *Cache[DB]) Forget(ctx context.Context, id store.ID) error {
	if c.local != nil {
		c.local.forget(id)
	}
	return c.c.Do(ctx, c.c.B().Del().Key(keyName(c.prefix, id)).Build()).Error()
}

// Get returns the key's live record: a cached completed record, else inner's (kept when
// completed).
func (c *Cache[DB]) Get(ctx context.Context, id store.ID) (store.Record, bool, error) {
	rec, at := c.lookup(ctx, id)
	if rec != nil {
		return *rec, true, nil
	}
	start := c.nanos()
	r, found, err := c.inner.Get(ctx, id)
	if err == nil && found {
		c.keep(ctx, id, &r, at, start, r.RetentionLeft)
	}
	return r, found, err
}

// Reserve answers from a cached completed record, else delegates to inner (keeping a completed
// record it returns).
func (c *Cache[DB]) Reserve(ctx context.Context, cl store.Claim) (store.Reservation, error) {
	rec, at := c.lookup(ctx, cl.ID)
	if rec != nil {
		return store.Reservation{Record: *rec}, nil
	}
	start := c.nanos()
	r, err := c.inner.Reserve(ctx, cl)
	if err == nil && !r.Claimed() {
		c.keep(ctx, cl.ID, &r.Record, at, start, r.Record.RetentionLeft)
	}
	return r, err
}

// Admit is inner's (store.Admitter), or inner's Get when inner has no limits to count against:
// it is a claim's path, so the cache does not answer it.
func (c *Cache[DB]) Admit(ctx context.Context, cl store.Claim) (store.Record, bool, error) {
	if a, ok := c.inner.(store.Admitter); ok {
		return a.Admit(ctx, cl)
	}
	return c.inner.Get(ctx, cl.ID)
}

var _ store.Admitter = (*Cache[struct{}])(nil)

// TakeOver delegates to inner.
func (c *Cache[DB]) TakeOver(ctx context.Context, cl store.Claim, old int64) (int64, error) {
	return c.inner.TakeOver(ctx, cl, old)
}

// Extend delegates to inner.
func (c *Cache[DB]) Extend(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	return c.inner.Extend(ctx, id, token, d)
}

// Complete delegates to inner; the record is cached by the next lookup that reads it.
func (c *Cache[DB]) Complete(ctx context.Context, cl store.Claim, token int64, resp store.Response) error {
	return c.inner.Complete(ctx, cl, token, resp)
}

// Release delegates to inner.
func (c *Cache[DB]) Release(ctx context.Context, id store.ID, token int64) error {
	return c.inner.Release(ctx, id, token)
}

// BeginCall delegates to inner.
func (c *Cache[DB]) BeginCall(ctx context.Context, cl store.Claim, token int64, call store.Call) error {
	return c.inner.BeginCall(ctx, cl, token, call)
}

// MarkUncertain delegates to inner.
func (c *Cache[DB]) MarkUncertain(ctx context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	return c.inner.MarkUncertain(ctx, id, token, reason)
}

// LogCall delegates to inner (store.CallLog), so that a paired lease store in front of the cache
// logs its calls in the database; it does nothing when inner keeps no call log.
func (c *Cache[DB]) LogCall(ctx context.Context, cl store.Claim, token int64, call store.Call) error {
	if l, ok := c.inner.(store.CallLog); ok {
		return l.LogCall(ctx, cl, token, call)
	}
	return nil
}

// ReleaseCalls delegates to inner (store.CallLog); it does nothing when inner keeps no call log.
func (c *Cache[DB]) ReleaseCalls(ctx context.Context, id store.ID) error {
	if l, ok := c.inner.(store.CallLog); ok {
		return l.ReleaseCalls(ctx, id)
	}
	return nil
}

// BeginAtomic answers from a cached completed record without calling inner; otherwise it
// delegates, keeps a completed record inner returns, and wraps inner's transaction so that its
// committed record is kept.
func (c *Cache[DB]) BeginAtomic(ctx context.Context, cl store.Claim) (store.Tx[DB], *store.Record, error) {
	rec, at := c.lookup(ctx, cl.ID)
	if rec != nil {
		return nil, rec, nil
	}
	start := c.nanos()
	tx, r, err := c.inner.BeginAtomic(ctx, cl)
	if r != nil {
		c.keep(ctx, cl.ID, r, at, start, r.RetentionLeft)
	}
	if tx == nil {
		return nil, r, err
	}
	return &cacheTx[DB]{Tx: tx, c: c, claim: cl, at: at}, nil, err
}

// BeginCompletion delegates to inner and wraps its transaction so that the completed record
// is kept in the in-process tier after the commit; Redis gets it from the first lookup that
// reads it from inner (a completion is not on the replay path, and no lookup preceded it to
// learn Redis's clock).
func (c *Cache[DB]) BeginCompletion(ctx context.Context, cl store.Claim, token int64) (store.Tx[DB], error) {
	tx, err := c.inner.BeginCompletion(ctx, cl, token)
	if tx == nil {
		return nil, err
	}
	return &cacheTx[DB]{Tx: tx, c: c, claim: cl, token: token}, err
}

// BeginPlain delegates to inner.
func (c *Cache[DB]) BeginPlain(ctx context.Context) (store.Tx[DB], error) {
	return c.inner.BeginPlain(ctx)
}

// cacheTx is inner's transaction; a committed response, or the record of a concurrent request
// that won, is kept.
type cacheTx[DB any] struct {
	store.Tx[DB]
	c     *Cache[DB]
	claim store.Claim
	token int64
	at    anchor
	kept  *store.Response
}

// Kept returns what the database kept at Commit (store.Kept).
func (t *cacheTx[DB]) Kept() (store.Response, bool) {
	if t.kept == nil {
		return store.Response{}, false
	}
	return *t.kept, true
}

func (t *cacheTx[DB]) Commit(ctx context.Context, resp store.Response) error {
	start := t.c.nanos()
	err := t.Tx.Commit(ctx, resp)
	if err == nil {
		// What the database kept: its per-scope caps may have omitted the body.
		resp = store.KeptResponse(t.Tx, resp)
		t.kept = &resp
		rec := store.Record{Operation: t.claim.Operation, Fingerprint: t.claim.Fingerprint,
			State: store.Completed, Token: t.token, Response: resp}
		t.c.keep(ctx, t.claim.ID, &rec, t.at, start, t.claim.Retention)
		return nil
	}
	t.c.keepCompleted(ctx, t.claim.ID, err, t.at, start)
	return err
}

func (t *cacheTx[DB]) Abort(ctx context.Context) error {
	start := t.c.nanos()
	err := t.Tx.Abort(ctx)
	t.c.keepCompleted(ctx, t.claim.ID, err, t.at, start)
	return err
}
