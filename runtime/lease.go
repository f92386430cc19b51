package runtime

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// DefaultLease is `lease` when an Operation leaves it zero: 30s (DESIGN section 2).
const DefaultLease = 30 * time.Second

// ErrLeaseLost is returned by LeaseHandle.Extend when the claim's fencing token is no longer the
// record's: its lease ended and another request with the same fingerprint took over (or the key
// was released). The handler should stop; its completion will not be stored.
var ErrLeaseLost = errors.New("runtime: lease lost to another request")

// LeaseHandle is a lease-mode handler's view of its claim: the fencing token, the heartbeat and
// the derivations that make downstream calls idempotent across attempts and takeovers.
type LeaseHandle struct {
	rt     *Runtime
	in     *claimInput
	token  int64
	secret []byte
	// unguarded handles (optional key absent) derive from a random nonce: nothing to deduplicate.
	nonce []byte
}

// Token returns the fencing token of this claim: 1 for the first claim of a key, one more for
// each takeover. A downstream system that stores it can refuse writes carrying a smaller one.
func (l *LeaseHandle) Token() int64 { return l.token }

// ProviderKey derives the idempotency key to send to a downstream provider for the call named
// label (e.g. "charge"): 64 lowercase hex digits, the same on every attempt and takeover of this
// (scope, key), different for every label, scope and key (DESIGN section 4). It is SHA-256, or
// HMAC-SHA256 under Config.ProviderKeySecret, over a length-prefixed framing of
// "idemgen/provider-key/v1", scope, the stored key (operation-qualified under scope operation)
// and label, so no two inputs share a framing.
func (l *LeaseHandle) ProviderKey(label string) string {
	return hex.EncodeToString(l.derive("idemgen/provider-key/v1", label))
}

// DeriveID derives a deterministic resource id (an RFC 9562 version 8 UUID in its text form)
// for the resource named label, so a handler that creates "the payment of this key" gives it the
// same id on every attempt and takeover. The framing is ProviderKey's with the domain
// "idemgen/resource-id/v1".
func (l *LeaseHandle) DeriveID(label string) string {
	b := l.derive("idemgen/resource-id/v1", label)[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (l *LeaseHandle) derive(domain, label string) []byte {
	var h hash.Hash
	if len(l.secret) > 0 {
		h = hmac.New(sha256.New, l.secret)
	} else {
		h = sha256.New()
	}
	frame := func(s []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	frame([]byte(domain))
	if l.nonce != nil {
		frame(l.nonce)
	} else {
		frame([]byte(l.in.scope))
		frame([]byte(l.in.key))
	}
	frame([]byte(label))
	return h.Sum(nil)
}

// Extend moves the lease's end to d after the database's now() (a heartbeat for a call that may
// outlast Operation.Lease). It returns ErrLeaseLost when the token is no longer the record's, or
// the store's error. Extending an unguarded handle does nothing.
func (l *LeaseHandle) Extend(d time.Duration) error {
	if l.nonce != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.rt.cfg.StoreTimeout)
	defer cancel()
	ct, err := l.rt.store.pool.Exec(ctx, sqlExtendLease, l.in.scope, l.in.key, l.token, d.Microseconds())
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	if ct.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// runLease is the lease-mode state machine for a present, valid key.
func (rt *Runtime) runLease(x *Exchange, key string, fp canonical.Fingerprint, fn LeaseFunc) {
	op := x.op
	lease := op.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	in := &claimInput{
		scope: x.scope, key: storedKey(op, key), op: op.ID, fp: fp,
		retention: retentionOf(op), lease: lease,
	}
	ctx := x.r.Context()
	deadline := time.Now().Add(op.Wait)
	var c leaseClaim
	for {
		start := time.Now()
		claimCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout)
		var err error
		c, err = rt.store.claimLease(claimCtx, in)
		cancel()
		rt.obs.ClaimLatency(op.ID, Lease, time.Since(start))
		if errors.Is(err, errInFlight) {
			rt.conflict(x, 0)
			return
		}
		if err != nil {
			rt.storeUnavailable(x, key, err)
			return
		}
		if c.token != 0 {
			break
		}
		// A running claim with the same request: wait for it while Operation.Wait allows.
		wait := time.Until(deadline)
		if c.rec.completed() || !c.rec.sameRequest(fp) || c.rec.operation != op.ID || wait <= 0 {
			rt.answerExisting(x, &c.rec, fp, key)
			return
		}
		select {
		case <-ctx.Done():
			rt.conflict(x, c.rec.leaseLeft)
			return
		case <-time.After(min(wait, 50*time.Millisecond)):
		}
	}
	if c.takeover {
		rt.obs.Outcome(op.ID, Lease, OutcomeTakeover)
		rt.log.Info("lease taken over", "operation", op.ID, "key_hash", keyHash(x.scope, in.key), "token", c.token)
	}

	h := &LeaseHandle{rt: rt, in: in, token: c.token, secret: rt.cfg.ProviderKeySecret}
	complete, err := callLease(ctx, fn, h)
	if err != nil {
		rt.releaseLease(in, c.token)
		rt.handlerFailed(x, key, err)
		return
	}

	// Completion: lock the record under our token, run the handler's writes, store, commit. The
	// external call has happened, so a client that went away no longer cancels the completion;
	// store calls stay bounded by StoreTimeout.
	completeCtx := context.WithoutCancel(ctx)
	doneCtx, cancel := context.WithTimeout(completeCtx, rt.cfg.StoreTimeout)
	defer cancel()
	conn, err := rt.store.pool.Acquire(doneCtx)
	if err != nil {
		rt.storeUnavailable(x, key, err)
		return
	}
	defer rt.store.discard(conn)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlLockLease, in.scope, in.key, c.token)
	br := conn.SendBatch(doneCtx, b)
	_, err = br.Exec()
	var lock pgconn.CommandTag
	if err == nil {
		lock, err = br.Exec()
	}
	locked := lock.RowsAffected()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rt.store.rollback(conn)
		rt.storeUnavailable(x, key, err)
		return
	}
	if locked == 0 {
		rt.store.rollback(conn)
		rt.leaseLost(x, in)
		return
	}
	resp, err := callComplete(completeCtx, complete, &managedTx{conn: conn.Conn()})
	if err != nil {
		rt.store.rollback(conn)
		rt.releaseLease(in, c.token)
		rt.handlerFailed(x, key, err)
		return
	}
	if !isFinal(op, resp.Status) {
		rt.store.rollback(conn)
		rt.releaseLease(in, c.token)
		rt.obs.Outcome(op.ID, Lease, OutcomeReleased)
		writeResponse(x.w, resp)
		return
	}
	st, err := prepareStored(op, resp)
	if err == nil {
		storeCtx, cancel := context.WithTimeout(completeCtx, rt.cfg.StoreTimeout)
		err = rt.store.completeAndCommit(storeCtx, conn, in, c.token, &st)
		cancel()
	}
	if err != nil {
		rt.store.rollback(conn)
		if errors.Is(err, errRecordLost) {
			rt.leaseLost(x, in)
			return
		}
		// The lease stays: a retry after it ends takes over, and the provider's deduplication
		// on ProviderKey keeps the external effect single.
		rt.storeUnavailable(x, key, err)
		return
	}
	rt.obs.Outcome(op.ID, Lease, OutcomeExecuted)
	writeResponse(x.w, resp)
}

// leaseLost answers a zombie: its lease was taken over, so its result is not stored. The client
// gets 409 in-flight: its retry replays the new owner's response.
func (rt *Runtime) leaseLost(x *Exchange, in *claimInput) {
	rt.obs.Outcome(x.op.ID, Lease, OutcomeLeaseLost)
	rt.log.Warn("lease lost before completion; result discarded", "operation", x.op.ID, "key_hash", keyHash(in.scope, in.key))
	rt.probes.write(x.w, 409, ProblemInFlight,
		"This attempt's lease was taken over by a retry; retry to get its result.", "", rt.cfg.ConflictRetryAfter)
}

// releaseLease deletes our running record so the key is free for the retry.
func (rt *Runtime) releaseLease(in *claimInput, token int64) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.StoreTimeout)
	defer cancel()
	if _, err := rt.store.pool.Exec(ctx, sqlRelease, in.scope, in.key, token); err != nil {
		// The lease will end on its own; the retry then takes over.
		rt.log.Warn("release lease failed", "operation", in.op, "key_hash", keyHash(in.scope, in.key), "error", err)
	}
}

// runUnguardedLease runs a lease-mode handler whose optional key is absent: no record; its
// derived keys come from a random nonce, so nothing downstream deduplicates either.
func (rt *Runtime) runUnguardedLease(x *Exchange, fn LeaseFunc) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	h := &LeaseHandle{rt: rt, in: &claimInput{scope: x.scope}, nonce: nonce, secret: rt.cfg.ProviderKeySecret}
	complete, err := callLease(x.r.Context(), fn, h)
	if err != nil {
		rt.handlerFailed(x, "", err)
		return
	}
	rt.runUnguardedAtomic(x, AtomicFunc(complete))
}

func callLease(ctx context.Context, fn LeaseFunc, h *LeaseHandle) (c CompleteFunc, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	c, err = fn(ctx, h)
	if err == nil && c == nil {
		err = errors.New("lease handler returned no CompleteFunc")
	}
	return c, err
}

func callComplete(ctx context.Context, fn CompleteFunc, tx pgx.Tx) (Response, error) {
	return callAtomic(ctx, AtomicFunc(fn), tx)
}

// leaseClaim is the result of claimLease: token != 0 when this request owns the key (takeover
// when it took an expired lease over), else rec is the key's live record.
type leaseClaim struct {
	token    int64
	takeover bool
	rec      record
}

// claimLease claims in.key in lease mode with autocommitted statements. It errors only when the
// store cannot be used, or errInFlight when the record kept changing under every attempt; a key
// held by others comes back as its record (claims commit at once, so a conflicting insert waits
// microseconds, never for a handler).
func (s *store) claimLease(ctx context.Context, in *claimInput) (leaseClaim, error) {
	for range maxClaimAttempts {
		var raw rawRecord
		var token *int64
		err := s.pool.QueryRow(ctx, sqlClaim, in.args(int64(1))...).Scan(append([]any{&token}, raw.targets()...)...)
		if err != nil {
			return leaseClaim{}, fmt.Errorf("claim: %w", err)
		}
		if token != nil {
			return leaseClaim{token: *token}, nil
		}
		rec, found := raw.record()
		if !found {
			if rec, found, err = s.read(ctx, s.pool, in.scope, in.key); err != nil {
				return leaseClaim{}, err
			}
			if !found {
				continue
			}
		}
		var sql string
		var args []any
		switch {
		case !rec.live:
			sql, args = sqlTakeExpired, in.args(nil)
		case !rec.completed() && rec.leaseLeft <= 0 && rec.operation == in.op &&
			uint16(rec.fpVersion) == in.fp.Version && rec.sameRequest(in.fp):
			sql, args = sqlTakeOverLease, []any{in.scope, in.key, rec.token, in.lease.Microseconds()}
		default:
			return leaseClaim{rec: rec}, nil
		}
		var next int64
		switch err := s.pool.QueryRow(ctx, sql, args...).Scan(&next); {
		case errors.Is(err, pgx.ErrNoRows):
			continue // someone else moved first; look again
		case err != nil:
			return leaseClaim{}, fmt.Errorf("take over: %w", err)
		}
		return leaseClaim{token: next, takeover: rec.live}, nil
	}
	return leaseClaim{}, errInFlight
}
