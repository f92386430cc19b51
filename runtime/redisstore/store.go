// Package redisstore puts idempotency records in Redis (standalone, or Redis Cluster), through
// the rueidis client, in two roles:
//
//   - Store, a lease-mode store of its own: Reserve, TakeOver, Extend, Complete and Release are
//     Lua scripts on the record's one key, comparing and swapping the fencing token; leases and
//     expiry follow the Redis server's clock (TIME, PEXPIRE); retention is the key's TTL, so
//     nothing needs sweeping. It implements store.Store. Pair joins it with a database store
//     (pgstore) so that generated lease-mode handlers, whose completion writes rows through a
//     database transaction, can run on it: see Paired.
//   - Cache, a replay cache in front of a database store (pgstore) for atomic and lease mode:
//     completed records are served from Redis (and, optionally, from a bounded in-process tier)
//     without a database round trip. It implements store.Transactional by delegation and never
//     answers differently from the database: on any Redis failure or slowness the database
//     answers.
//
// Every key is the record's digest in a hash tag ({<digest>}, no raw scope or key), and every
// script touches that one key, so every call runs on one Redis Cluster node. docs/redis.md
// describes durability (AOF settings, what a failover can lose, what each risks for money),
// eviction (which maxmemory-policy each store needs) and when to choose which store.
//
//	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	pg := pgstore.New(pool, pgstore.Options{})
//	cache := redisstore.NewCache[pgstore.DBTX](pg, rdb, redisstore.CacheOptions{LocalBytes: 64 << 20})
//	rt, err := runtime.New(runtime.Config{Store: cache, Scope: tenantOf})
//
//	leases, err := redisstore.New(rdb, redisstore.Options{})
//	rt, err := runtime.New(runtime.Config{Store: redisstore.Pair[pgstore.DBTX](leases, pg), Scope: tenantOf})
package redisstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/runtime/store"
)

// Options configures a Store.
type Options struct {
	// Prefix starts the name of every key the store writes; default "idemgen:lease:". It must
	// not contain '{' or '}' (the record's hash tag follows it).
	Prefix string
	// AbandonAfter is how long after its lease ended a running record is kept for its owner's
	// completion or a retry's takeover before Redis deletes it (the key's TTL does what
	// pgstore's Sweeper.AbandonAfter does); default 24h. Until then the key stays refused to
	// any other request (422), however long the call takes.
	AbandonAfter time.Duration
	// PolicyRecheck is how often the store reads the servers' maxmemory-policy again while it
	// runs (it also reads it when made and after every connection failure); default 10s. Claims
	// are refused with ErrEvictionPolicy while a server's policy is not noeviction.
	PolicyRecheck time.Duration
	// AssumeNoEviction says that the servers' maxmemory-policy is noeviction although they
	// refuse to tell (CONFIG GET and INFO both refused, as on some managed services): without
	// it, such a server is refused with ErrPolicyUnknown. A policy the server does tell is
	// checked whatever this says.
	AssumeNoEviction bool
}

// Store is the lease-mode store on Redis: one hash per record under a hash-tagged key, changed
// only by Lua scripts that compare and swap the fencing token by the server's clock. It holds
// no state besides the client and its options and is safe for concurrent use.
//
// Fencing tokens are the Redis server's clock in microseconds at the claim (a takeover takes
// the larger of the old token + 1 and the clock), so they grow across claims of a key even after
// its record expired and vanished.
//
// Its durability is the Redis deployment's: a claim acknowledged by a master that crashes before
// its AOF or its replica has it is lost, and the key can then be claimed again. docs/redis.md
// says what each setting risks; Pair with a database store makes that loss harmless for the
// records' completions.
type Store struct {
	c       rueidis.Client
	prefix  string
	abandon string // Options.AbandonAfter in µs
	policy  *policyGuard
}

var _ store.Store = (*Store)(nil)

// New returns the lease store on client (a standalone, sentinel or cluster client of rueidis).
// It reads every server's maxmemory-policy (within 5 s) and fails with ErrEvictionPolicy when
// one is not noeviction, or ErrPolicyUnknown when one will not say (see
// Options.AssumeNoEviction); a server that does not answer is checked before the first claim.
// It fails when opts.Prefix contains a brace.
func New(client rueidis.Client, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = "idemgen:lease:"
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if opts.AbandonAfter <= 0 {
		opts.AbandonAfter = 24 * time.Hour
	}
	if opts.PolicyRecheck <= 0 {
		opts.PolicyRecheck = 10 * time.Second
	}
	s := &Store{c: client, prefix: opts.Prefix, abandon: micros(opts.AbandonAfter),
		policy: &policyGuard{c: client, every: opts.PolicyRecheck, assume: opts.AssumeNoEviction}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.policy.allow(ctx); err != nil && (errors.Is(err, ErrEvictionPolicy) || errors.Is(err, ErrPolicyUnknown)) {
		return nil, err
	}
	return s, nil
}

// key is what every script is given: the record's hash, and its tombstone's key in the same
// hash slot.
func (s *Store) key(id store.ID) []string {
	k := keyName(s.prefix, id)
	return []string{k, tombstoneName(k)}
}

// Get returns the key's live record; found is false when there is none (completed records
// vanish when their retention ends). Errors are Redis's or the network's, wrapped.
func (s *Store) Get(ctx context.Context, id store.ID) (store.Record, bool, error) {
	m, err := scriptGet.Exec(ctx, s.c, s.key(id), nil).ToMessage()
	if err != nil {
		s.policy.failed(err)
		return store.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	rec, found, err := parseRecord(&m)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	return rec, found, nil
}

// Reserve claims c.ID with a lease of c.Lease and a new fencing token, or returns the key's live
// record. A running record stays until it is completed (then it replays for c.Retention after
// completion) or released, or until Options.AbandonAfter after its lease ended.
func (s *Store) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	if err := s.policy.allow(ctx); err != nil {
		return store.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	m, err := scriptReserve.Exec(ctx, s.c, s.key(c.ID), []string{
		c.Operation, fingerprintBytes(c.Fingerprint), micros(c.Lease), s.abandon,
	}).ToMessage()
	if err != nil {
		s.policy.failed(err)
		return store.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if m.IsString() {
		tok, err := parseToken(&m)
		if err != nil {
			return store.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
		}
		return store.Reservation{Token: tok}, nil
	}
	rec, found, err := parseRecord(&m)
	if err == nil && !found {
		err = errFormat
	}
	if err != nil {
		return store.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	return store.Reservation{Record: rec}, nil
}

// TakeOver moves the running record whose lease has ended from token old to a new token with a
// lease of c.Lease, and returns the new token; store.ErrLost when the record is not running under
// old with an ended lease.
func (s *Store) TakeOver(ctx context.Context, c store.Claim, old int64) (int64, error) {
	if err := s.policy.allow(ctx); err != nil {
		return 0, fmt.Errorf("redisstore: take over: %w", err)
	}
	m, err := scriptTakeOver.Exec(ctx, s.c, s.key(c.ID), []string{strconv.FormatInt(old, 10), micros(c.Lease), s.abandon}).ToMessage()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, store.ErrLost
	case err != nil:
		s.policy.failed(err)
		return 0, fmt.Errorf("redisstore: take over: %w", err)
	}
	tok, err := parseToken(&m)
	if err != nil {
		return 0, fmt.Errorf("redisstore: take over: %w", err)
	}
	return tok, nil
}

// Extend moves the end of the lease held under token to d after the server's now (and keeps the
// key at least that long); store.ErrLost when token no longer holds the record.
func (s *Store) Extend(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	return s.cas(ctx, "extend", scriptExtend, id, strconv.FormatInt(token, 10), micros(d), "0", s.abandon)
}

// extendAtLeast is Extend that never moves the lease end earlier (a completion's guard must not
// undo a heartbeat's longer lease).
func (s *Store) extendAtLeast(ctx context.Context, id store.ID, token int64, d time.Duration) error {
	return s.cas(ctx, "extend", scriptExtend, id, strconv.FormatInt(token, 10), micros(d), "1", s.abandon)
}

// Complete stores resp in the record held under token and makes it completed, replaying for
// c.Retention from the server's now, then remembered by its tombstone (a second key in the
// record's hash slot, tombstoneName) until c.Tombstone from now; store.ErrLost when token no
// longer holds the record.
func (s *Store) Complete(ctx context.Context, c store.Claim, token int64, resp store.Response) error {
	return s.complete(ctx, c.ID, token, nil, &resp, c)
}

// complete is Complete for the record of id, kept as c says (Retention, Tombstone); with rec
// set, the record becomes rec (its operation and fingerprint too), for the paired store's
// repairs.
func (s *Store) complete(ctx context.Context, id store.ID, token int64, rec *store.Record, resp *store.Response, c store.Claim) error {
	op, fp := "", ""
	if rec != nil {
		op, fp, resp = rec.Operation, fingerprintBytes(rec.Fingerprint), &rec.Response
	}
	omitted, body := "0", string(resp.Body)
	if resp.BodyOmitted {
		omitted, body = "1", ""
	}
	tomb := "0"
	if c.Tombstone > c.Retention {
		tomb = micros(c.Tombstone)
	}
	return s.cas(ctx, "complete", scriptComplete, id, strconv.FormatInt(token, 10), op, fp,
		strconv.Itoa(resp.Status), string(resp.Header), body, omitted, micros(c.Retention), tomb)
}

// Release deletes the record held under token, so the key is new again; a record no longer held
// under token is left alone (nil).
func (s *Store) Release(ctx context.Context, id store.ID, token int64) error {
	if err := scriptRelease.Exec(ctx, s.c, s.key(id), []string{strconv.FormatInt(token, 10)}).Error(); err != nil {
		s.policy.failed(err)
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

// BeginCall records call in the record running under token (store.Store): one script on its
// key. store.ErrLost when token no longer holds the record.
func (s *Store) BeginCall(ctx context.Context, c store.Claim, token int64, call store.Call) error {
	enc, err := json.Marshal(encodeCall(call))
	if err != nil {
		return fmt.Errorf("redisstore: begin call: %w", err)
	}
	return s.cas(ctx, "begin call", scriptBeginCall, c.ID, strconv.FormatInt(token, 10), call.Label, string(enc))
}

// MarkUncertain marks the record running under token uncertain when its call phase started
// calls (store.Store); a record no longer held under token is left alone.
func (s *Store) MarkUncertain(ctx context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	if err := scriptMarkUncertain.Exec(ctx, s.c, s.key(id), []string{strconv.FormatInt(token, 10), strconv.Itoa(int(reason))}).Error(); err != nil {
		return fmt.Errorf("redisstore: mark uncertain: %w", err)
	}
	return nil
}

// storedCall is a call as the record's "pc" field holds it; amounts travel as decimal strings
// (Lua's numbers are doubles).
type storedCall struct {
	Label       string `json:"l"`
	ProviderKey string `json:"k"`
	Amount      string `json:"a,omitempty"`
	Currency    string `json:"c,omitempty"`
	At          string `json:"t,omitempty"`
}

func encodeCall(c store.Call) storedCall {
	sc := storedCall{Label: c.Label, ProviderKey: c.ProviderKey}
	if c.Currency != "" {
		sc.Amount, sc.Currency = strconv.FormatInt(c.Amount, 10), c.Currency
	}
	return sc
}

// parseCalls reads a record's "pc" field.
func parseCalls(pc string) ([]store.Call, error) {
	if pc == "" {
		return nil, nil
	}
	var raw []storedCall
	if err := json.Unmarshal([]byte(pc), &raw); err != nil {
		return nil, errFormat
	}
	out := make([]store.Call, len(raw))
	for i, r := range raw {
		out[i] = store.Call{Label: r.Label, ProviderKey: r.ProviderKey}
		if r.Currency != "" {
			n, err := strconv.ParseInt(r.Amount, 10, 64)
			if err != nil {
				return nil, errFormat
			}
			out[i].Amount, out[i].Currency = n, r.Currency
		}
	}
	return out, nil
}

// cas runs a compare-and-swap script that answers 1 (done) or 0 (the token does not hold).
func (s *Store) cas(ctx context.Context, what string, script *rueidis.Lua, id store.ID, args ...string) error {
	n, err := script.Exec(ctx, s.c, s.key(id), args).AsInt64()
	switch {
	case err != nil:
		s.policy.failed(err)
		return fmt.Errorf("redisstore: %s: %w", what, err)
	case n == 0:
		return store.ErrLost
	}
	return nil
}

// parseToken reads a fencing token sent as a decimal string.
func parseToken(m *rueidis.RedisMessage) (int64, error) {
	s, err := m.ToString()
	if err != nil {
		return 0, err
	}
	tok, err := strconv.ParseInt(s, 10, 64)
	if err != nil || tok <= 0 {
		return 0, errFormat
	}
	return tok, nil
}

// parseTombstone reads a tombstone's value, written by scriptComplete: the status class (one
// digit), ':', the completion time in µs of the server's clock, ':', then the fingerprint's
// 2-byte version and first store.TombstoneSumBytes bytes of its sum; pttl is the key's time to
// live in ms.
func parseTombstone(v string, pttl int64) (store.Record, bool, error) {
	class, rest, ok1 := strings.Cut(v, ":")
	at, fp, ok2 := strings.Cut(rest, ":")
	n, err1 := strconv.Atoi(class)
	us, err2 := strconv.ParseInt(at, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || len(fp) != 2+store.TombstoneSumBytes {
		return store.Record{}, false, errFormat
	}
	rec := store.Record{State: store.Expired, StatusClass: n, CompletedAt: time.UnixMicro(us).UTC()}
	rec.Fingerprint.Version = binary.BigEndian.Uint16([]byte(fp[:2]))
	copy(rec.Fingerprint.Sum[:], fp[2:])
	if pttl > 0 {
		rec.ForgetLeft = time.Duration(pttl) * time.Millisecond
	}
	return rec, true, nil
}

// parseRecord reads the reply of prelude's record(): found is false for an empty array.
func parseRecord(m *rueidis.RedisMessage) (rec store.Record, found bool, err error) {
	a, err := m.ToArray()
	if err != nil {
		return rec, false, err
	}
	if len(a) == 0 {
		return rec, false, nil
	}
	if len(a) != 10 {
		return rec, false, errFormat
	}
	var f [10]string
	for i := range a {
		if i == 5 {
			continue // PTTL is an integer
		}
		if f[i], err = a[i].ToString(); err != nil {
			return rec, false, errFormat
		}
	}
	if f[2] == "x" {
		// A tombstone (prelude's tomb): f[6] is its value, the PTTL its horizon left.
		pttl, err := a[5].AsInt64()
		if err != nil {
			return rec, false, errFormat
		}
		return parseTombstone(f[6], pttl)
	}
	rec.Operation = f[0]
	if rec.Fingerprint, err = parseFingerprint(f[1]); err != nil {
		return rec, false, errFormat
	}
	if rec.Token, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return rec, false, errFormat
	}
	left, err1 := strconv.ParseInt(f[4], 10, 64)
	pttl, err2 := a[5].AsInt64()
	if err1 != nil || err2 != nil {
		return rec, false, errFormat
	}
	switch f[2] {
	case "r":
		rec.State = store.Running
		rec.LeaseLeft = time.Duration(left) * time.Microsecond
	case "c":
		rec.State = store.Completed
		if pttl > 0 {
			rec.RetentionLeft = time.Duration(pttl) * time.Millisecond
		}
		status, err := strconv.Atoi(f[6])
		if err != nil {
			return rec, false, errFormat
		}
		rec.Response.Status = status
		if f[7] != "" {
			rec.Response.Header = []byte(f[7])
		}
		if f[9] == "1" {
			rec.Response.BodyOmitted = true
		} else {
			rec.Response.Body = []byte(f[8])
		}
	default:
		return rec, false, errFormat
	}
	return rec, true, nil
}
