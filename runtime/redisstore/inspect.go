package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/runtime/store"
)

// Support tools (runtime/admin's Lookup and support page, `idemgen records`) read records
// through store.Inspector. The lease store implements it on Redis; the paired store reads Redis first
// and its database for the rest; the cache is its database's (it holds only copies).

var (
	_ store.Inspector = (*Store)(nil)
	_ store.Inspector = (*Paired[struct{}])(nil)
	_ store.Inspector = (*Cache[struct{}])(nil)
)

// errNoInspector: the database store behind a cache or a paired store cannot be inspected.
var errNoInspector = errors.New("redisstore: the database store does not implement store.Inspector")

// scriptInspect returns what Inspect needs of one record: {o, f, s, t, l, rs, rh, ro, ca, da,
// pttl ms, server clock µs, body length, body ("" unless ARGV[1] is "1"), u, ua, pc}; for a key
// without a record, its tombstone: {"x", value, pttl ms, server clock µs}; else an empty array.
var scriptInspect = rueidis.NewLuaScriptReadOnly(prelude + `
local v = redis.call('HMGET', KEYS[1], 'o', 'f', 's', 't', 'l', 'rs', 'rh', 'ro', 'ca', 'da', 'u', 'ua', 'pc')
if not v[3] then
  local t = redis.call('GET', KEYS[2])
  if t then return {'x', t, redis.call('PTTL', KEYS[2]), fmt(now_us())} end
  return {}
end
local body = ''
if ARGV[1] == '1' then body = redis.call('HGET', KEYS[1], 'rb') or '' end
return {v[1], v[2], v[3], v[4], v[5] or '', v[6] or '', v[7] or '', v[8] or '', v[9] or '', v[10] or '',
  redis.call('PTTL', KEYS[1]), fmt(now_us()), redis.call('HSTRLEN', KEYS[1], 'rb'), body,
  v[11] or '', v[12] or '', v[13] or ''}
`)

// Inspect reads the records of keys in scope (stored keys), one script per key, in the order of
// keys, leaving out keys with neither a record nor a tombstone. Redis deletes a record when it
// expires, so every snapshot is Live; ExpiresAt is when Redis will delete it (for a running
// record: its lease's end plus Options.AbandonAfter); a key whose record is gone and whose
// tombstone remains is its tombstone (State Expired, ForgetAt when Redis deletes it). Errors
// are Redis's, wrapped.
func (s *Store) Inspect(ctx context.Context, scope string, keys []string, withBody bool) ([]store.Snapshot, error) {
	flag := "0"
	if withBody {
		flag = "1"
	}
	var out []store.Snapshot
	for _, k := range keys {
		id := store.ID{Scope: scope, Key: k}
		a, err := scriptInspect.Exec(ctx, s.c, s.key(id), []string{flag}).ToArray()
		if err != nil {
			return nil, fmt.Errorf("redisstore: inspect: %w", err)
		}
		if len(a) == 0 {
			continue
		}
		snap, err := parseSnapshot(id, a, withBody)
		snap.Ref = s.key(id)[0]
		if err != nil {
			return nil, fmt.Errorf("redisstore: inspect: %w", err)
		}
		out = append(out, snap)
	}
	return out, nil
}

func parseSnapshot(id store.ID, a []rueidis.RedisMessage, withBody bool) (store.Snapshot, error) {
	snap := store.Snapshot{ID: id, Live: true}
	if len(a) == 4 {
		return parseTombstoneSnapshot(snap, a)
	}
	if len(a) != 17 {
		return snap, errFormat
	}
	var f [17]string
	for i := range a {
		if i == 10 || i == 12 {
			continue // integers
		}
		var err error
		if f[i], err = a[i].ToString(); err != nil {
			return snap, errFormat
		}
	}
	pttl, err1 := a[10].AsInt64()
	size, err2 := a[12].AsInt64()
	now, err3 := strconv.ParseInt(f[11], 10, 64)
	fp, err4 := parseFingerprint(f[1])
	tok, err5 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return snap, errFormat
	}
	at := func(us string) time.Time {
		n, err := strconv.ParseInt(us, 10, 64)
		if err != nil || us == "" {
			return time.Time{}
		}
		return time.UnixMicro(n)
	}
	snap.Operation, snap.Fingerprint, snap.Token = f[0], fp, tok
	snap.ReadAt = time.UnixMicro(now)
	snap.CreatedAt, snap.CompletedAt = at(f[8]), at(f[9])
	if pttl > 0 {
		snap.ExpiresAt = snap.ReadAt.Add(time.Duration(pttl) * time.Millisecond)
	}
	snap.BodySize = size
	calls, err := parseCalls(f[16])
	if err != nil {
		return snap, err
	}
	snap.Calls = calls
	switch f[2] {
	case "r":
		snap.State = store.Running
		snap.LockedUntil = at(f[4])
		if !snap.LockedUntil.IsZero() {
			snap.LeaseLeft = snap.LockedUntil.Sub(snap.ReadAt)
		}
		snap.Uncertain, snap.UncertainSince = uncertainty(f[14], at(f[15]), len(calls) > 0, snap.LeaseLeft)
	case "c":
		snap.State = store.Completed
		snap.Response.Status, _ = strconv.Atoi(f[5])
		if f[6] != "" {
			snap.Response.Header = []byte(f[6])
		}
		snap.Response.BodyOmitted = f[7] == "1"
		if withBody && !snap.Response.BodyOmitted {
			snap.Response.Body = []byte(f[13])
		}
	default:
		return snap, errFormat
	}
	return snap, nil
}

// parseTombstoneSnapshot reads scriptInspect's reply for a tombstone.
func parseTombstoneSnapshot(snap store.Snapshot, a []rueidis.RedisMessage) (store.Snapshot, error) {
	v, err1 := a[1].ToString()
	pttl, err2 := a[2].AsInt64()
	clock, err3 := a[3].ToString()
	now, err4 := strconv.ParseInt(clock, 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return snap, errFormat
	}
	rec, _, err := parseTombstone(v, pttl)
	if err != nil {
		return snap, err
	}
	snap.State, snap.Fingerprint, snap.StatusClass, snap.CompletedAt = store.Expired, rec.Fingerprint, rec.StatusClass, rec.CompletedAt
	snap.ReadAt = time.UnixMicro(now)
	snap.ForgetAt = snap.ReadAt.Add(rec.ForgetLeft)
	return snap, nil
}

// uncertainty is a running record's store.Uncertainty from its mark u (marked at ua), whether
// its call phase started calls, and its lease's time left.
func uncertainty(u string, ua time.Time, calls bool, left time.Duration) (store.Uncertainty, time.Time) {
	if n, err := strconv.Atoi(u); err == nil && n > 0 {
		return store.Uncertainty(n), ua
	}
	if calls && left <= 0 {
		return store.UncertainLeaseEnded, time.Time{}
	}
	return store.NotUncertain, time.Time{}
}

// Uncertain lists the uncertain records (store.Inspector): it SCANs every node for the store's
// prefix, as Stats does, and reads each running record's state, lease, mark and calls. It is for
// support tools, never the request path. Snapshot.Ref is the record's Redis key; Snapshot.ID is
// left empty. Errors are Redis's, wrapped.
func (s *Store) Uncertain(ctx context.Context, since time.Time, limit int) ([]store.Snapshot, error) {
	var out []store.Snapshot
	for _, node := range s.c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(globEscape(s.prefix)+"*").Count(500).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("redisstore: uncertain records: %w", err)
			}
			found, err := s.uncertainOf(ctx, node, e.Elements, since)
			if err != nil {
				return nil, err
			}
			out = append(out, found...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b store.Snapshot) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Ref, b.Ref)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// uncertainOf reads the records named keys (on node) and returns the uncertain ones claimed at
// or after since.
func (s *Store) uncertainOf(ctx context.Context, node rueidis.Client, keys []string, since time.Time) ([]store.Snapshot, error) {
	keys = slices.DeleteFunc(slices.Clone(keys), isTombstoneName)
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, 0, len(keys)+1)
	for _, k := range keys {
		cmds = append(cmds, node.B().Hmget().Key(k).Field("o", "f", "s", "t", "l", "ca", "u", "ua", "pc").Build())
	}
	cmds = append(cmds, node.B().Time().Build())
	res := node.DoMulti(ctx, cmds...)
	t, err := res[len(res)-1].AsIntSlice()
	if err != nil || len(t) != 2 {
		return nil, fmt.Errorf("redisstore: uncertain records: TIME: %v", err)
	}
	now := time.UnixMicro(t[0]*1_000_000 + t[1])
	var out []store.Snapshot
	for i, k := range keys {
		v, err := res[i].ToArray()
		if err != nil || len(v) != 9 {
			continue // gone meanwhile
		}
		var f [9]string
		for j := range v {
			f[j], _ = v[j].ToString() // nil fields read as ""
		}
		if f[2] != "r" || f[8] == "" {
			continue // completed, or no call started
		}
		us := func(s string) time.Time {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return time.Time{}
			}
			return time.UnixMicro(n)
		}
		sn := store.Snapshot{Ref: k, Operation: f[0], State: store.Running, Live: true, ReadAt: now,
			CreatedAt: us(f[5]), LockedUntil: us(f[4])}
		sn.LeaseLeft = sn.LockedUntil.Sub(now)
		calls, err := parseCalls(f[8])
		if err != nil {
			continue // not written by this package
		}
		sn.Calls = calls
		sn.Uncertain, sn.UncertainSince = uncertainty(f[6], us(f[7]), true, sn.LeaseLeft)
		if sn.Uncertain == store.NotUncertain || sn.CreatedAt.Before(since) {
			continue
		}
		if sn.Fingerprint, err = parseFingerprint(f[1]); err != nil {
			continue
		}
		sn.Token, _ = strconv.ParseInt(f[3], 10, 64)
		out = append(out, sn)
	}
	return out, nil
}

// Stats summarises every record of the store: it SCANs every node for the store's prefix and
// reads each record's state, lease and sizes, and counts the tombstones. It is for support
// tools, never the request path. Expired and ForgottenTombstones count nothing (Redis deletes
// what expires); StorageBytes is 0 (unknown). Errors
// are Redis's, wrapped.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Operations: []store.OperationStats{}}
	byOp := map[string]*store.OperationStats{}
	for _, node := range s.c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(globEscape(s.prefix)+"*").Count(500).Build()).AsScanEntry()
			if err != nil {
				return st, fmt.Errorf("redisstore: stats: %w", err)
			}
			if err := s.count(ctx, node, e.Elements, &st, byOp); err != nil {
				return st, err
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	if st.ReadAt.IsZero() {
		st.ReadAt = time.Now()
		if t, err := s.c.Do(ctx, s.c.B().Time().Build()).AsIntSlice(); err == nil && len(t) == 2 {
			st.ReadAt = time.UnixMicro(t[0]*1_000_000 + t[1])
		}
	}
	for _, o := range byOp {
		st.Operations = append(st.Operations, *o)
	}
	slices.SortFunc(st.Operations, func(a, b store.OperationStats) int { return strings.Compare(a.Operation, b.Operation) })
	return st, nil
}

// count adds the records named keys (on node) to st and byOp, and counts the tombstones among
// them.
func (s *Store) count(ctx context.Context, node rueidis.Client, keys []string, st *store.Stats, byOp map[string]*store.OperationStats) error {
	n := len(keys)
	keys = slices.DeleteFunc(slices.Clone(keys), isTombstoneName)
	st.Tombstones += int64(n - len(keys))
	if len(keys) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(keys)+1)
	for _, k := range keys {
		cmds = append(cmds, node.B().Hmget().Key(k).Field("o", "s", "l", "ca", "rh", "u", "pc").Build(), node.B().Hstrlen().Key(k).Field("rb").Build())
	}
	cmds = append(cmds, node.B().Time().Build())
	res := node.DoMulti(ctx, cmds...)
	t, err := res[len(res)-1].AsIntSlice()
	if err != nil || len(t) != 2 {
		return fmt.Errorf("redisstore: stats: TIME: %v", err)
	}
	now := time.UnixMicro(t[0]*1_000_000 + t[1])
	st.ReadAt = now
	for i := range keys {
		v, err := res[2*i].ToArray()
		if err != nil || len(v) != 7 || v[1].IsNil() {
			continue // gone meanwhile
		}
		op, _ := v[0].ToString()
		state, _ := v[1].ToString()
		o := byOp[op]
		if o == nil {
			o = &store.OperationStats{Operation: op}
			byOp[op] = o
		}
		body, _ := res[2*i+1].AsInt64()
		hdr, _ := v[4].ToString()
		o.ResponseBytes += body + int64(len(hdr))
		st.ResponseBytes += body + int64(len(hdr))
		if state != "r" {
			o.Completed++
			st.Completed++
			continue
		}
		o.Running++
		st.Running++
		ended := false
		if l, err := v[2].AsInt64(); err == nil && time.UnixMicro(l).Before(now) {
			ended = true
			o.Stale++
			st.Stale++
		}
		if u, _ := v[5].ToString(); u != "" || (!v[6].IsNil() && ended) {
			o.Uncertain++
			st.Uncertain++
		}
		if ca, err := v[3].AsInt64(); err == nil {
			c := time.UnixMicro(ca)
			if o.OldestRunning == nil || c.Before(*o.OldestRunning) {
				o.OldestRunning = &c
			}
			if st.OldestRunning == nil || c.Before(*st.OldestRunning) {
				st.OldestRunning = &c
			}
		}
	}
	return nil
}

// globEscape escapes the glob characters of SCAN's MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Inspect reads each key's record in Redis, and in the database for the keys Redis has no record
// of (atomic-mode records, and lease records Redis lost). Errors are Redis's or the database's.
func (p *Paired[DB]) Inspect(ctx context.Context, scope string, keys []string, withBody bool) ([]store.Snapshot, error) {
	snaps, err := p.r.Inspect(ctx, scope, keys, withBody)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for _, sn := range snaps {
		found[sn.ID.Key] = true
	}
	var rest []string
	for _, k := range keys {
		if !found[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) > 0 {
		in, ok := p.db.(store.Inspector)
		if !ok {
			return nil, errNoInspector
		}
		more, err := in.Inspect(ctx, scope, rest, withBody)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, more...)
	}
	// In the order of keys.
	pos := map[string]int{}
	for i, k := range keys {
		if _, dup := pos[k]; !dup {
			pos[k] = i
		}
	}
	slices.SortStableFunc(snaps, func(a, b store.Snapshot) int { return pos[a.ID.Key] - pos[b.ID.Key] })
	return snaps, nil
}

// Uncertain is Redis's: the running lease records, and so the uncertain ones, are there.
func (p *Paired[DB]) Uncertain(ctx context.Context, since time.Time, limit int) ([]store.Snapshot, error) {
	return p.r.Uncertain(ctx, since, limit)
}

// Stats is the database's summary (every completed record is there) plus the running lease
// records, which only Redis holds.
func (p *Paired[DB]) Stats(ctx context.Context) (store.Stats, error) {
	in, ok := p.db.(store.Inspector)
	if !ok {
		return store.Stats{}, errNoInspector
	}
	st, err := in.Stats(ctx)
	if err != nil {
		return st, err
	}
	rs, err := p.r.Stats(ctx)
	if err != nil {
		return st, err
	}
	byOp := map[string]int{}
	for i, o := range st.Operations {
		byOp[o.Operation] = i
	}
	for _, o := range rs.Operations {
		if o.Running == 0 {
			continue
		}
		i, ok := byOp[o.Operation]
		if !ok {
			st.Operations = append(st.Operations, store.OperationStats{Operation: o.Operation})
			i = len(st.Operations) - 1
			byOp[o.Operation] = i
		}
		d := &st.Operations[i]
		d.Running += o.Running
		d.Stale += o.Stale
		d.Uncertain += o.Uncertain
		if o.OldestRunning != nil && (d.OldestRunning == nil || o.OldestRunning.Before(*d.OldestRunning)) {
			d.OldestRunning = o.OldestRunning
		}
	}
	slices.SortFunc(st.Operations, func(a, b store.OperationStats) int { return strings.Compare(a.Operation, b.Operation) })
	st.Running += rs.Running
	st.Stale += rs.Stale
	st.Uncertain += rs.Uncertain
	if rs.OldestRunning != nil && (st.OldestRunning == nil || rs.OldestRunning.Before(*st.OldestRunning)) {
		st.OldestRunning = rs.OldestRunning
	}
	return st, nil
}

// Inspect is the database's (the cache holds only copies of its completed records).
func (c *Cache[DB]) Inspect(ctx context.Context, scope string, keys []string, withBody bool) ([]store.Snapshot, error) {
	in, ok := c.inner.(store.Inspector)
	if !ok {
		return nil, errNoInspector
	}
	return in.Inspect(ctx, scope, keys, withBody)
}

// Uncertain is the database's (the cache holds only completed records).
func (c *Cache[DB]) Uncertain(ctx context.Context, since time.Time, limit int) ([]store.Snapshot, error) {
	in, ok := c.inner.(store.Inspector)
	if !ok {
		return nil, errNoInspector
	}
	return in.Uncertain(ctx, since, limit)
}

// Stats is the database's.
func (c *Cache[DB]) Stats(ctx context.Context) (store.Stats, error) {
	in, ok := c.inner.(store.Inspector)
	if !ok {
		return store.Stats{}, errNoInspector
	}
	return in.Stats(ctx)
}
