package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// A replay's read, bounded by its deadline (the runtime's StoreTimeout), runs on the
// connection's pgconn without pgx's context watch (directread.go). These tests hold it to what
// pgx's query path guaranteed: the deadline ends a read that hangs and the connection goes
// (never back to the pool), a read that ends in time leaves no deadline on its connection, the
// pool's tracer sees the read, and a statement that changed or vanished on the server is
// prepared again. They run on a pool of one connection, so that every read is on the same one
// until it is closed.

// directRig is a store over a one-connection pool with a tracer, a completed record, and a
// second pool to lock the records' table with.
type directRig struct {
	pool, admin *pgxpool.Pool
	st          *pgstore.Store
	tr          *queryLog
	claim       store.Claim
	resp        store.Response
}

func newDirectRig(t *testing.T) *directRig {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	tr := &queryLog{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if err := migrate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if citus(admin) {
		t.Skip("the hanging read is made by LOCK TABLE, not checked on a distributed table")
	}
	r := &directRig{pool: pool, admin: admin, st: pgstore.New(pool, pgstore.Options{Partitioned: partitioned()}), tr: tr,
		claim: inspectClaim("t1", "k-direct-00000000001", "createPayment", time.Minute),
		resp:  store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"]}`), Body: []byte(`{"id":7}`)}}
	tok := reserve(t, r.st, r.claim)
	if err := r.st.Complete(ctx, withRetention(r.claim, time.Hour), tok, r.resp); err != nil {
		t.Fatal(err)
	}
	return r
}

// replay is the atomic-mode lookup of the rig's key under ctx: its record, or the error.
func (r *directRig) replay(ctx context.Context) (*store.Record, error) {
	tx, rec, err := r.st.BeginAtomic(ctx, r.claim)
	if tx != nil {
		_ = tx.Abort(context.Background())
		return nil, errors.New("the key was claimed, not read")
	}
	return rec, err
}

// within is ctx bounded by d, as the runtime bounds a store call.
func within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// pid is the server process of the pool's one connection.
func (r *directRig) pid(t *testing.T) int32 {
	t.Helper()
	var pid int32
	if err := r.pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// lockTable holds an ACCESS EXCLUSIVE lock on the records' table, which makes every read of it
// wait, until the returned func is called.
func (r *directRig) lockTable(t *testing.T) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := r.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE idempotency_records IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(unlock)
	return unlock
}

func (r *directRig) wantReplay(t *testing.T, rec *store.Record, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if rec == nil || rec.State != store.Completed || rec.Response.Status != r.resp.Status || string(rec.Response.Body) != string(r.resp.Body) {
		t.Fatalf("replay read %+v, want the completed record", rec)
	}
}

// The deadline ends a read that hangs: the error wraps context.DeadlineExceeded, the tracer sees
// the read end with it, and the connection is closed, never reused (pgx closes a connection
// whose query's context ended mid-read the same way); the next replay runs on a new one.
func TestDirectReadEndsAtItsDeadline(t *testing.T) {
	r := newDirectRig(t)
	ctx, cancel := within(5 * time.Second)
	rec, err := r.replay(ctx)
	cancel()
	r.wantReplay(t, rec, err)
	before := r.pid(t)

	unlock := r.lockTable(t)
	r.tr.reset()
	start := time.Now()
	ctx, cancel = within(300 * time.Millisecond)
	rec, err = r.replay(ctx)
	cancel()
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 10*time.Second {
		t.Fatalf("a read that hangs past its deadline: %+v, %v after %v; want context.DeadlineExceeded", rec, err, took)
	}
	if starts, ends := r.tr.get(); len(starts) != 1 || len(ends) != 1 || !errors.Is(ends[0], context.DeadlineExceeded) {
		t.Errorf("tracer saw starts %q, ends %v; want the read's start and its end with the deadline's error", starts, ends)
	}
	unlock()

	ctx, cancel = within(5 * time.Second)
	rec, err = r.replay(ctx)
	cancel()
	r.wantReplay(t, rec, err)
	if after := r.pid(t); after == before {
		t.Errorf("server process %d before the timeout and after: the timed-out connection went back to the pool", before)
	}
}

// A read that ends in time leaves no deadline on its connection: the connection's next
// statement, long after that deadline, runs.
func TestDirectReadLeavesNoDeadline(t *testing.T) {
	r := newDirectRig(t)
	ctx, cancel := within(200 * time.Millisecond)
	rec, err := r.replay(ctx)
	cancel()
	r.wantReplay(t, rec, err)
	before := r.pid(t)
	time.Sleep(400 * time.Millisecond)
	if after := r.pid(t); after != before {
		t.Errorf("server process %d, then %d: the connection did not survive a read that ended in time", before, after)
	}
	if _, err := r.pool.Exec(context.Background(), "SELECT pg_sleep(0.1)"); err != nil {
		t.Errorf("a statement on the connection after the read's deadline: %v", err)
	}
}

// The client going away during the read does not end it (docs/runtime.md, "Problems (RFC
// 9457)"): the read is bounded by its deadline alone and keeps its connection; its answer is
// the context's error, as through pgx (the runtime's outcome canceled, nothing claimed).
func TestDirectReadOutlivesTheClient(t *testing.T) {
	r := newDirectRig(t)
	ctx, cancel := within(5 * time.Second)
	rec, err := r.replay(ctx)
	cancel()
	r.wantReplay(t, rec, err)
	before := r.pid(t)

	unlock := r.lockTable(t)
	ctx, cancel = within(10 * time.Second)
	time.AfterFunc(200*time.Millisecond, cancel)
	time.AfterFunc(600*time.Millisecond, unlock)
	start := time.Now()
	rec, err = r.replay(ctx)
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.Canceled) || rec != nil {
		t.Fatalf("a replay whose client went away during its read: %+v, %v; want context.Canceled", rec, err)
	}
	if took < 500*time.Millisecond {
		t.Errorf("the read ended after %v, before the table's lock was released: the client's going away ended it", took)
	}
	if after := r.pid(t); after != before {
		t.Errorf("server process %d, then %d: the connection was closed", before, after)
	}

	// Canceled before it starts, it sends nothing.
	ctx, cancel = within(10 * time.Second)
	cancel()
	r.tr.reset()
	if _, err := r.replay(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a replay whose context ended before it: %v, want context.Canceled", err)
	}
	if starts, _ := r.tr.get(); len(starts) != 0 {
		t.Errorf("statements sent for a replay whose context had ended: %q", starts)
	}
}

// The pool's tracer sees the direct read as pgx's query path shows a query: its SQL and
// arguments at the start, its command tag at the end; one statement.
func TestDirectReadIsTraced(t *testing.T) {
	r := newDirectRig(t)
	for range 2 { // the first prepares the statement
		r.tr.reset()
		ctx, cancel := within(5 * time.Second)
		rec, err := r.replay(ctx)
		cancel()
		r.wantReplay(t, rec, err)
	}
	starts, ends := r.tr.get()
	if len(starts) != 1 || !strings.HasPrefix(starts[0], "SELECT ") || len(ends) != 1 || ends[0] != nil {
		t.Fatalf("tracer saw starts %q, ends %v; want one SELECT ended without error", starts, ends)
	}
	if r.tr.args != 3 || r.tr.tag != "SELECT 1" {
		t.Errorf("tracer saw %d arguments and command tag %q, want 3 and SELECT 1", r.tr.args, r.tr.tag)
	}
}

// A statement that is no longer what was prepared (a column's type changed) or no longer exists
// (DEALLOCATE ALL, behind pgx's back) is prepared again: the replay still reads its record.
func TestDirectReadPreparesAgain(t *testing.T) {
	r := newDirectRig(t)
	read := func(what string) {
		t.Helper()
		ctx, cancel := within(5 * time.Second)
		defer cancel()
		rec, err := r.replay(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r.wantReplay(t, rec, err)
	}
	read("first read")
	if _, err := r.pool.Exec(context.Background(), "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	read("after DEALLOCATE ALL")
	read("again")
	if _, err := r.admin.Exec(context.Background(), "ALTER TABLE idempotency_records ALTER COLUMN operation TYPE varchar"); err != nil {
		t.Fatal(err)
	}
	// The first read after that may fail, as through pgx's statement cache alone, which also
	// answers the server's error once and then prepares again (here pgx had cached the statement
	// when it read after DEALLOCATE ALL).
	ctx, cancel := within(5 * time.Second)
	_, err := r.replay(ctx)
	cancel()
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && pe.Code == "0A000") {
		t.Fatalf("the first read after a column's type changed: %v", err)
	}
	read("after the operation column became varchar")
	read("again, read by pgx (a column not of the direct read's types)")
}

// queryLog is a pgx.QueryTracer that records the statements started and how they ended.
type queryLog struct {
	mu     sync.Mutex
	starts []string
	ends   []error
	args   int
	tag    string
}

func (q *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.starts = append(q.starts, d.SQL)
	q.args = len(d.Args)
	return ctx
}

func (q *queryLog) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ends = append(q.ends, d.Err)
	q.tag = d.CommandTag.String()
}

func (q *queryLog) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.starts, q.ends = nil, nil
}

func (q *queryLog) get() ([]string, []error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.starts...), append([]error(nil), q.ends...)
}
