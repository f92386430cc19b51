package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

const paymentsTable = `CREATE TABLE IF NOT EXISTS paired_effects (scope text, key text, note text)`

// effects counts the rows a completion wrote for key.
func effects(t *testing.T, pg *pgstore.Store, key string) int {
	t.Helper()
	var n int
	if err := pg.Pool().QueryRow(context.Background(), `SELECT count(*) FROM paired_effects WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// complete runs a lease-mode completion that writes one row, as a generated handler's
// CompleteFunc does, and commits it.
func complete(ctx context.Context, s store.Transactional[pgstore.DBTX], c store.Claim, token int64, body string) error {
	tx, err := s.BeginCompletion(ctx, c, token)
	if err != nil {
		return err
	}
	hctx := tx.HandlerContext(ctx)
	if _, err := tx.DB().Exec(hctx, `INSERT INTO paired_effects VALUES ($1, $2, $3)`, c.ID.Scope, c.ID.Key, body); err != nil {
		_ = tx.Abort(ctx)
		return err
	}
	return tx.Commit(ctx, created(body))
}

func leaseClaim(key, body string, lease time.Duration) store.Claim {
	c := atomicClaim(key, body, time.Hour)
	c.Operation, c.Lease = "captureCharge", lease
	return c
}

// pairedT is a paired store of one test, with what the test looks behind it at.
type pairedT struct {
	*redisstore.Paired[pgstore.DBTX]
	r      *redisstore.Store
	pg     *pgstore.Store
	client rueidis.Client
	prefix string
}

func newPairedForTest(t *testing.T, topo redistest.Topology) pairedT {
	t.Helper()
	p := pairedT{client: redistest.NewClient(t, topo), prefix: redistest.Prefix(t), pg: newPG(t)}
	var err error
	if p.r, err = redisstore.New(p.client, redisstore.Options{Prefix: p.prefix}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pg.Pool().Exec(context.Background(), paymentsTable); err != nil {
		t.Fatal(err)
	}
	p.Paired = redisstore.Pair[pgstore.DBTX](p.r, p.pg)
	return p
}

// lose deletes id's record from Redis behind the store's back, as a failover that lost the
// write would.
func (p pairedT) lose(t *testing.T, id store.ID) {
	t.Helper()
	key := p.prefix + "{" + store.DigestOf(id).KeyUUID() + "}"
	if n, err := p.client.Do(context.Background(), p.client.B().Del().Key(key).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("lose %s: %d %v", key, n, err)
	}
}

// databaseHalf writes, without Redis, what a paired completion commits in PostgreSQL: the row
// and the completed record, in one atomic-mode transaction.
func (p pairedT) databaseHalf(t *testing.T, c store.Claim, body string) {
	t.Helper()
	ctx := context.Background()
	c.Lease = 0
	tx, rec, err := p.pg.BeginAtomic(ctx, c)
	if err != nil || tx == nil {
		t.Fatalf("BeginAtomic: %+v %v", rec, err)
	}
	hctx := tx.HandlerContext(ctx)
	if _, err := tx.DB().Exec(hctx, `INSERT INTO paired_effects VALUES ($1, $2, $3)`, c.ID.Scope, c.ID.Key, body); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx, created(body)); err != nil {
		t.Fatal(err)
	}
}

// TestPairedCompletion: the completion's row and the completed record commit in PostgreSQL,
// then the record is completed in Redis, where its replays come from.
func TestPairedCompletion(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			p := newPairedForTest(t, topo)
			r, pg := p.r, p.pg
			ctx := context.Background()
			c := leaseClaim("k-complete", "a", time.Minute)
			res, err := p.Reserve(ctx, c)
			if err != nil || !res.Claimed() {
				t.Fatalf("Reserve: %+v, %v", res, err)
			}
			if err := complete(ctx, p, c, res.Token, "done"); err != nil {
				t.Fatal(err)
			}
			if n := effects(t, pg, c.ID.Key); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
			for name, s := range map[string]store.Store{"redis": r, "postgres": pg} {
				rec, found, err := s.Get(ctx, c.ID)
				if err != nil || !found || rec.State != store.Completed || string(rec.Response.Body) != "done" {
					t.Errorf("%s's record: %+v %v %v", name, rec, found, err)
				}
			}
			again, err := p.Reserve(ctx, c)
			if err != nil || again.Claimed() || again.Record.State != store.Completed {
				t.Fatalf("Reserve after completion: %+v, %v", again, err)
			}
		})
	}
}

// TestPairedRedisLostTheRecord: a record that Redis lost (failover, restart without AOF) is
// found in PostgreSQL by the next claim, copied back to Redis and answered: the key does not
// run again.
func TestPairedRedisLostTheRecord(t *testing.T) {
	p := newPairedForTest(t, redistest.Standalone)
	ctx := context.Background()
	c := leaseClaim("k-lost", "a", time.Minute)
	res, _ := p.Reserve(ctx, c)
	if err := complete(ctx, p, c, res.Token, "done"); err != nil {
		t.Fatal(err)
	}
	p.lose(t, c.ID)
	again, err := p.Reserve(ctx, c)
	if err != nil || again.Claimed() || string(again.Record.Response.Body) != "done" {
		t.Fatalf("Reserve after Redis lost the record: %+v, %v", again, err)
	}
	rec, found, err := p.r.Get(ctx, c.ID)
	if err != nil || !found || rec.State != store.Completed || rec.RetentionLeft <= 0 || rec.RetentionLeft > time.Hour {
		t.Fatalf("Redis's copy after the repair: %+v %v %v", rec, found, err)
	}
	if n := effects(t, p.pg, c.ID.Key); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestPairedCompletedButRedisNotUpdated: the database committed a completion but Redis never
// heard of it (the process died between the two): duplicates get 409 while the lease runs; the
// takeover after it finds the database's record, copies it to Redis, and the request replays
// it without running again.
func TestPairedCompletedButRedisNotUpdated(t *testing.T) {
	p := newPairedForTest(t, redistest.Standalone)
	ctx := context.Background()
	c := leaseClaim("k-half", "a", 200*time.Millisecond)
	res, err := p.Reserve(ctx, c)
	if err != nil || !res.Claimed() {
		t.Fatal(err)
	}
	p.databaseHalf(t, c, "done")
	dup, err := p.Reserve(ctx, c)
	if err != nil || dup.Claimed() || dup.Record.State != store.Running || dup.Record.LeaseLeft <= 0 {
		t.Fatalf("a duplicate while the lease runs: %+v, %v (want the running record: 409)", dup, err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := p.TakeOver(ctx, c, res.Token); !errors.Is(err, store.ErrLost) {
		t.Fatalf("TakeOver after the lease: %v, want ErrLost (the database has the record)", err)
	}
	got, err := p.Reserve(ctx, c)
	if err != nil || got.Claimed() || got.Record.State != store.Completed || string(got.Record.Response.Body) != "done" {
		t.Fatalf("Reserve after the repair: %+v, %v", got, err)
	}
	if n := effects(t, p.pg, c.ID.Key); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestPairedZombieCompletions: a zombie whose lease was taken over cannot complete (Redis
// refuses its token before it opens a transaction); and when an owner's completion is still
// open in the database as its lease ends and another request takes over, only one of the two
// completions commits its row.
func TestPairedZombieCompletions(t *testing.T) {
	p := newPairedForTest(t, redistest.Standalone)
	ctx := context.Background()
	c := leaseClaim("k-zombie", "a", 100*time.Millisecond)
	zombie, _ := p.Reserve(ctx, c)
	time.Sleep(150 * time.Millisecond)
	next, err := p.TakeOver(ctx, c, zombie.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := complete(ctx, p, c, zombie.Token, "zombie"); !errors.Is(err, store.ErrLost) {
		t.Fatalf("the zombie's completion: %v, want ErrLost", err)
	}
	if err := complete(ctx, p, c, next, "new"); err != nil {
		t.Fatal(err)
	}

	d := leaseClaim("k-both", "a", 100*time.Millisecond)
	first, _ := p.Reserve(ctx, d)
	slow, err := p.BeginCompletion(ctx, d, first.Token) // extends the lease by 100ms
	if err != nil {
		t.Fatal(err)
	}
	sctx := slow.HandlerContext(ctx)
	if _, err := slow.DB().Exec(sctx, `INSERT INTO paired_effects VALUES ($1, $2, 'slow')`, d.ID.Scope, d.ID.Key); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the slow completion outlives its lease
	taken, err := p.TakeOver(ctx, d, first.Token)
	if err != nil {
		t.Fatal(err)
	}
	err = complete(ctx, p, d, taken, "taker")
	var done *store.CompletedError
	if err == nil || (!errors.Is(err, store.ErrBusy) && !errors.Is(err, store.ErrClaimLost) && !errors.As(err, &done)) {
		t.Fatalf("the second completion while the first holds the key in the database: %v", err)
	}
	if err := slow.Commit(ctx, created("slow")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k-zombie", "k-both"} {
		if n := effects(t, p.pg, k); n != 1 {
			t.Errorf("%s: %d rows, want 1", k, n)
		}
	}
	got, err := p.Reserve(ctx, d)
	if err == nil && !got.Claimed() && got.Record.State == store.Running {
		// The taker's completion met the slow one's claim in the database (ErrBusy: the read
		// tries the claim lock) before the slow one committed, so Redis still holds the taker's
		// running claim. Its lease ends; the takeover that follows finds the database's record,
		// copies it to Redis and answers ErrLost, as in TestPairedCompletedButRedisNotUpdated.
		time.Sleep(got.Record.LeaseLeft + 50*time.Millisecond)
		if _, err := p.TakeOver(ctx, d, got.Record.Token); !errors.Is(err, store.ErrLost) {
			t.Fatalf("TakeOver after the taker's lease: %v, want ErrLost (the database has the record)", err)
		}
		got, err = p.Reserve(ctx, d)
	}
	if err != nil || got.Claimed() || string(got.Record.Response.Body) != "slow" {
		t.Fatalf("Reserve after both: %+v, %v", got, err)
	}
}

// TestPairedAtomicRecordAnswersLeaseClaims: a key used by an atomic-mode operation (its record
// in PostgreSQL) answers a later lease-mode claim without running it.
func TestPairedAtomicRecordAnswersLeaseClaims(t *testing.T) {
	p := newPairedForTest(t, redistest.Cluster)
	ctx := context.Background()
	a := atomicClaim("k-shared", "a", time.Hour)
	commit(t, p, a, created("atomic"))
	res, err := p.Reserve(ctx, leaseClaim("k-shared", "a", time.Minute))
	if err != nil || res.Claimed() || res.Record.Operation != "createPayment" {
		t.Fatalf("lease claim of a key an atomic operation completed: %+v, %v", res, err)
	}
	res, err = p.Reserve(ctx, leaseClaim("k-shared", "a", time.Minute))
	if err != nil || res.Claimed() || res.Record.Operation != "createPayment" {
		t.Fatalf("again (from Redis now): %+v, %v", res, err)
	}
}

// TestPairedCompletionKeepsALongerLease: the completion's guard extends the lease to at least
// the operation's lease, and never shortens one a heartbeat made longer.
func TestPairedCompletionKeepsALongerLease(t *testing.T) {
	p := newPairedForTest(t, redistest.Standalone)
	ctx := context.Background()
	c := leaseClaim("k-heartbeat", "a", 100*time.Millisecond)
	res, _ := p.Reserve(ctx, c)
	if err := p.Extend(ctx, c.ID, res.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	tx, err := p.BeginCompletion(ctx, c, res.Token)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, _ := p.r.Get(ctx, c.ID)
	if rec.LeaseLeft < 50*time.Second {
		t.Errorf("lease left after BeginCompletion: %v, want the heartbeat's minute", rec.LeaseLeft)
	}
	if err := tx.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := p.r.Get(ctx, c.ID); found {
		t.Error("the aborted completion left its claim in Redis")
	}
}

// TestPairedInspect: support tools see a running lease claim (only in Redis), a completed lease
// record (Redis) and an atomic-mode record (PostgreSQL), in the order asked; Stats counts the
// running claim with the database's records.
func TestPairedInspect(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			p := newPairedForTest(t, topo)
			ctx := context.Background()
			running := leaseClaim("k-running", "a", time.Minute)
			if _, err := p.Reserve(ctx, running); err != nil {
				t.Fatal(err)
			}
			done := leaseClaim("k-done", "a", time.Minute)
			res, _ := p.Reserve(ctx, done)
			if err := complete(ctx, p, done, res.Token, "done"); err != nil {
				t.Fatal(err)
			}
			commit(t, p, atomicClaim("k-atomic", "a", time.Hour), created("atomic"))
			snaps, err := p.Inspect(ctx, "tenant-1", []string{"k-atomic", "k-none", "k-running", "k-done"}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(snaps) != 3 || snaps[0].ID.Key != "k-atomic" || snaps[1].ID.Key != "k-running" || snaps[2].ID.Key != "k-done" {
				t.Fatalf("snapshots %+v", snaps)
			}
			r, d := snaps[1], snaps[2]
			if r.State != store.Running || r.LeaseLeft <= 0 || r.CreatedAt.IsZero() || r.Operation != "captureCharge" || !r.Live {
				t.Errorf("running claim: %+v", r)
			}
			if d.State != store.Completed || string(d.Response.Body) != "done" || d.BodySize != 4 || d.CompletedAt.IsZero() ||
				d.ExpiresAt.Sub(d.ReadAt) > time.Hour || d.ExpiresAt.Sub(d.ReadAt) < 59*time.Minute {
				t.Errorf("completed lease record: %+v", d)
			}
			if a := snaps[0]; a.State != store.Completed || string(a.Response.Body) != "atomic" {
				t.Errorf("atomic record: %+v", a)
			}
			st, err := p.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Running != 1 || st.Completed != 2 {
				t.Errorf("stats %+v: want 1 running (Redis) and 2 completed (PostgreSQL)", st)
			}
		})
	}
}

// TestPairedCallLog: the paired store records a call in Redis and in PostgreSQL's call log,
// where reconciliation reads it; the completion commits the call's outcome with the record, a
// release marks it released.
func TestPairedCallLog(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			p := newPairedForTest(t, topo)
			ctx := context.Background()
			outcome := func(pk string) store.CallOutcome {
				t.Helper()
				got, err := p.pg.FindCalls(ctx, []string{pk})
				if err != nil || len(got) != 1 {
					t.Fatalf("FindCalls: %+v, %v", got, err)
				}
				return got[0].Outcome
			}
			for _, end := range []string{"complete", "release"} {
				c := leaseClaim("k-call-"+end, "a", time.Minute)
				res, err := p.Reserve(ctx, c)
				if err != nil || !res.Claimed() {
					t.Fatalf("Reserve: %+v, %v", res, err)
				}
				pk := strings.Repeat("0", 63) + strconv.Itoa(len(end))
				if err := p.BeginCall(ctx, c, res.Token+1, store.Call{Label: "charge", ProviderKey: pk}); !errors.Is(err, store.ErrLost) {
					t.Fatalf("BeginCall under another token: %v, want ErrLost", err)
				}
				if err := p.BeginCall(ctx, c, res.Token, store.Call{Label: "charge", ProviderKey: pk}); err != nil {
					t.Fatal(err)
				}
				if o := outcome(pk); o != store.CallStarted {
					t.Fatalf("%s: logged call %s, want started", end, o)
				}
				snaps, err := p.Inspect(ctx, c.ID.Scope, []string{c.ID.Key}, false)
				if err != nil || len(snaps) != 1 || len(snaps[0].Calls) != 1 || snaps[0].Calls[0].ProviderKey != pk {
					t.Fatalf("Inspect: %+v, %v", snaps, err)
				}
				want := store.CallCompleted
				if end == "complete" {
					c.Calls = true
					if err := complete(ctx, p, c, res.Token, "done"); err != nil {
						t.Fatal(err)
					}
				} else {
					want = store.CallReleased
					if err := p.Release(ctx, c.ID, res.Token); err != nil {
						t.Fatal(err)
					}
				}
				if o := outcome(pk); o != want {
					t.Errorf("%s: logged call %s, want %s", end, o, want)
				}
			}
		})
	}
}
