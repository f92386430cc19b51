// Package memstore is an in-memory idempotency store for unit tests of the runtime's state
// machine and of code built on it. It keeps records in a map under one mutex, runs the
// handler's writes in a tiny transactional key-value table (DB), and takes its time from a
// clock the test may move. It passes the shared suite of runtime/store/storetest, but it is
// never the proof that a real store works: records vanish with the process.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// Store is an in-memory store.Transactional[*DB]. The zero value is not ready: use New.
type Store struct {
	mu      sync.Mutex
	now     func() time.Time
	records map[store.ID]*entry
	data    map[string]string // committed business writes (DB)
	held    map[store.ID]bool // atomic claims in progress (never visible as records)
	tokens  int64
}

type entry struct {
	rec         store.Record
	lockedUntil time.Time
	expires     time.Time
	// completed is when a completed record completed; forget when its tombstone ends (zero:
	// it has none, and the key is new again at expires).
	completed, forget time.Time
	// calls are the calls its call phase recorded (BeginCall); uncertain its mark.
	calls     []store.Call
	uncertain store.Uncertainty
}

var _ store.Transactional[*DB] = (*Store)(nil)

// New returns an empty store on the clock now (nil: time.Now).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, records: map[store.ID]*entry{}, data: map[string]string{}, held: map[store.ID]bool{}}
}

// Value returns a committed business value written through DB.Put, for assertions.
func (s *Store) Value(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[key]
	return v, ok
}

// live returns the key's live record entry (mu held): a completed record until it expires and
// then, as a tombstone, until it is forgotten; a running one until it is completed or released.
func (s *Store) live(id store.ID) *entry {
	e := s.records[id]
	now := s.now()
	if e == nil || (e.rec.State == store.Completed && !now.Before(e.expires) && !now.Before(e.forget)) {
		return nil
	}
	return e
}

// view is the record of a live entry as a store answers it: a completed record past its
// retention is its tombstone.
func (s *Store) view(e *entry) store.Record {
	r := e.rec
	now := s.now()
	switch {
	case r.State == store.Running:
		r.LeaseLeft = e.lockedUntil.Sub(now)
	case now.Before(e.expires):
		r.RetentionLeft = e.expires.Sub(now)
	default:
		t := store.Record{State: store.Expired, StatusClass: r.Response.Status / 100, CompletedAt: e.completed, ForgetLeft: e.forget.Sub(now)}
		t.Fingerprint.Version = r.Fingerprint.Version
		copy(t.Fingerprint.Sum[:store.TombstoneSumBytes], r.Fingerprint.Sum[:])
		return t
	}
	return r
}

// complete makes e completed now with resp, replaying for retention and then remembered until
// tombstone after now (none when not longer than retention).
func (e *entry) complete(now time.Time, resp store.Response, retention, tombstone time.Duration) {
	e.rec.State, e.rec.Response = store.Completed, resp
	e.completed, e.expires, e.forget = now, now.Add(retention), time.Time{}
	if tombstone > retention {
		e.forget = now.Add(tombstone)
	}
}

// Get returns the key's live record.
func (s *Store) Get(_ context.Context, id store.ID) (store.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live(id); e != nil {
		return s.view(e), true, nil
	}
	return store.Record{}, false, nil
}

// Reserve claims the key with a lease, or returns its live record.
func (s *Store) Reserve(_ context.Context, c store.Claim) (store.Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live(c.ID); e != nil {
		return store.Reservation{Record: s.view(e)}, nil
	}
	if s.held[c.ID] {
		return store.Reservation{}, store.ErrBusy
	}
	token := int64(1)
	if old := s.records[c.ID]; old != nil {
		token = old.rec.Token + 1
	}
	now := s.now()
	s.records[c.ID] = &entry{
		rec:         store.Record{Operation: c.Operation, Fingerprint: c.Fingerprint, State: store.Running, Token: token},
		lockedUntil: now.Add(c.Lease),
		expires:     now.Add(c.Lease + c.Retention), // a retention after the lease ends
	}
	return store.Reservation{Token: token}, nil
}

// TakeOver moves a running record whose lease ended to the next token.
func (s *Store) TakeOver(_ context.Context, c store.Claim, old int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(c.ID)
	now := s.now()
	if e == nil || e.rec.State != store.Running || e.rec.Token != old || now.Before(e.lockedUntil) {
		return 0, store.ErrLost
	}
	e.rec.Token++
	e.moveLease(now.Add(c.Lease))
	if len(e.calls) > 0 {
		e.uncertain = store.UncertainTakenOver
	}
	return e.rec.Token, nil
}

// BeginCall records a call of the record running under token.
func (s *Store) BeginCall(_ context.Context, c store.Claim, token int64, call store.Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.held1(c.ID, token)
	if e == nil {
		return store.ErrLost
	}
	for _, have := range e.calls {
		if have.Label == call.Label {
			return nil
		}
	}
	e.calls = append(e.calls, call)
	return nil
}

// MarkUncertain marks the record running under token uncertain, when its call phase started a
// call.
func (s *Store) MarkUncertain(_ context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.held1(id, token); e != nil && len(e.calls) > 0 {
		e.uncertain = reason
	}
	return nil
}

// Uncertain returns, for assertions, the key's running record's uncertainty (its mark, or
// UncertainLeaseEnded when its lease ended after its call phase started calls) and the calls its
// call phase recorded; NotUncertain and nil calls when it has no running record.
func (s *Store) Uncertain(id store.ID) (store.Uncertainty, []store.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.records[id]
	if e == nil || e.rec.State != store.Running {
		return store.NotUncertain, nil
	}
	u := e.uncertain
	if u == store.NotUncertain && len(e.calls) > 0 && !s.now().Before(e.lockedUntil) {
		u = store.UncertainLeaseEnded
	}
	return u, append([]store.Call(nil), e.calls...)
}

// Extend moves the running record's lease end to d from now.
func (s *Store) Extend(_ context.Context, id store.ID, token int64, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.held1(id, token)
	if e == nil {
		return store.ErrLost
	}
	e.moveLease(s.now().Add(d))
	return nil
}

// Complete stores resp under token.
func (s *Store) Complete(_ context.Context, c store.Claim, token int64, resp store.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completeLocked(&c, token, resp)
}

func (s *Store) completeLocked(c *store.Claim, token int64, resp store.Response) error {
	e := s.held1(c.ID, token)
	if e == nil {
		return store.ErrLost
	}
	e.complete(s.now(), resp, c.Retention, c.Tombstone)
	e.uncertain = store.NotUncertain
	return nil
}

// Release deletes the running record held under token.
func (s *Store) Release(_ context.Context, id store.ID, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.records[id]; e != nil && e.rec.State == store.Running && e.rec.Token == token {
		delete(s.records, id)
	}
	return nil
}

// held1 returns the running record held under token (mu held), live or not.
func (s *Store) held1(id store.ID, token int64) *entry {
	e := s.records[id]
	if e == nil || e.rec.State != store.Running || e.rec.Token != token {
		return nil
	}
	return e
}

// BeginAtomic claims the key for an atomic-mode request, or returns its live record. The claim
// is invisible as a record until Commit, as in a database; a concurrent claim gets ErrBusy.
func (s *Store) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[*DB], *store.Record, error) {
	// A claim that may wait (concurrency.wait) polls until the concurrent claim ends, its own
	// wait runs out (real time, as a database's lock_timeout) or ctx ends.
	deadline := time.Now().Add(c.Wait)
	s.mu.Lock()
	for s.held[c.ID] && c.Wait > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if e := s.live(c.ID); e != nil {
		r := s.view(e)
		return nil, &r, nil
	}
	if s.held[c.ID] {
		return nil, nil, store.ErrBusy
	}
	s.held[c.ID] = true
	s.tokens++
	return &tx{s: s, claim: &c, token: s.tokens, db: &DB{writes: map[string]string{}}}, nil, nil
}

// BeginCompletion opens the completion of a lease-mode claim held under token.
func (s *Store) BeginCompletion(_ context.Context, c store.Claim, token int64) (store.Tx[*DB], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held1(c.ID, token) == nil {
		return nil, store.ErrLost
	}
	return &tx{s: s, claim: &c, token: token, lease: true, db: &DB{writes: map[string]string{}}}, nil
}

// BeginPlain opens a transaction without a record.
func (s *Store) BeginPlain(context.Context) (store.Tx[*DB], error) {
	return &tx{s: s, db: &DB{writes: map[string]string{}}}, nil
}

// DB is the handle a handler writes through: a key-value table whose writes commit with the
// record.
type DB struct {
	mu     sync.Mutex
	writes map[string]string
}

// Put writes key = value in the transaction.
func (d *DB) Put(key, value string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes[key] = value
}

type tx struct {
	s     *Store
	claim *store.Claim // nil: plain
	token int64
	lease bool // a lease-mode completion
	db    *DB
	done  bool
}

func (t *tx) HandlerContext(parent context.Context) context.Context { return parent }
func (t *tx) DB() *DB                                               { return t.db }
func (t *tx) Confirm(context.Context) error                         { return nil }

// Commit applies the handler's writes and stores resp in one step.
func (t *tx) Commit(_ context.Context, resp store.Response) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	defer t.end()
	switch {
	case t.claim == nil:
	case t.lease:
		if err := s.completeLocked(t.claim, t.token, resp); err != nil {
			return err
		}
	default:
		if e := s.live(t.claim.ID); e != nil {
			return &store.CompletedError{Record: s.view(e)}
		}
		e := &entry{rec: store.Record{Operation: t.claim.Operation, Fingerprint: t.claim.Fingerprint, Token: t.token}}
		e.complete(s.now(), resp, t.claim.Retention, t.claim.Tombstone)
		s.records[t.claim.ID] = e
	}
	t.db.mu.Lock()
	for k, v := range t.db.writes {
		s.data[k] = v
	}
	t.db.mu.Unlock()
	return nil
}

// Abort drops the handler's writes and releases the claim.
func (t *tx) Abort(context.Context) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.lease {
		if e := s.held1(t.claim.ID, t.token); e != nil {
			delete(s.records, t.claim.ID)
		}
	}
	t.end()
	return nil
}

// end frees an atomic claim (mu held).
func (t *tx) end() {
	if !t.done && t.claim != nil && !t.lease {
		delete(t.s.held, t.claim.ID)
	}
	t.done = true
}

// moveLease ends a running record's lease at until, keeping the gap between its lease's end and
// its expiry (the retention).
func (e *entry) moveLease(until time.Time) {
	e.expires = later(e.expires, until.Add(e.expires.Sub(e.lockedUntil)))
	e.lockedUntil = until
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
