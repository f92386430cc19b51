package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Adversarial tests of ClaimWithStatement (pending.go, tx.go): each pins one behaviour at an
// edge of the pipelined claim (its timer, its first statement, a lost claim, a cancelled client).

// spin busy-waits about d: a handler that works without blocking, around the moment the claim
// timer fires.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// A timer callback that fired but had not got the block's mutex when the handler returned must
// do nothing (pendingBlock.settled): the transaction has taken the connection back and may
// already have released it to the pool. Found by a tester: the callback used a released
// pgxpool.Conn, a nil dereference in a timer goroutine that killed the process. Handlers here
// return, without a statement, around the moment the timer fires.
func TestTimerCallbackAfterSettleDoesNothing(t *testing.T) {
	e := newEnv(t, withDelay(time.Millisecond))
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		spin(time.Duration(700+rand.IntN(600)) * time.Microsecond)
		if r.Header.Get("X-Err") != "" {
			return runtime.Response{}, errors.New("handler error")
		}
		return runtime.Response{Status: http.StatusServiceUnavailable}, nil // non-final: released
	})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				extra := []string{}
				if i%2 == 0 {
					extra = []string{"X-Err", "1"}
				}
				w := serve(h, req("t1", fmt.Sprintf("k-race-settle-%d-%04d", g, i), body100, extra...))
				if w.Code != 503 && w.Code != 500 {
					t.Errorf("request %d/%d: %d %s", g, i, w.Code, w.Body)
				}
			}
		}()
	}
	wg.Wait()
	if n := e.records(); n != 0 {
		t.Errorf("%d records after non-final answers", n)
	}
}

// The handler's first statement and the timer's claim never use the connection at the same
// time: whichever comes first holds the block's mutex, the other finds the block open. Every
// form of first statement is sent around the moment the timer fires. (The old runtime's version
// of this test raced tx.Prepare; DBTX has no Prepare.)
func TestFirstStatementRacesTheTimerClaim(t *testing.T) {
	e := newEnv(t, withDelay(time.Millisecond))
	forms := []func(ctx context.Context, db pgstore.DBTX) error{
		func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		func(ctx context.Context, db pgstore.DBTX) error {
			var id int64
			return db.QueryRow(ctx, insertPay+" RETURNING id", "t1", 100).Scan(&id)
		},
		func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ('t1', 100)")
			return err
		},
		func(ctx context.Context, db pgstore.DBTX) error {
			b := &pgx.Batch{}
			b.Queue(insertPay, "t1", 100)
			return db.SendBatch(ctx, b).Close()
		},
		func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.CopyFrom(ctx, pgx.Identifier{"payments"}, []string{"scope", "amount"}, pgx.CopyFromRows([][]any{{"t1", int64(100)}}))
			return err
		},
	}
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		spin(time.Duration(700+rand.IntN(600)) * time.Microsecond)
		var form int
		fmt.Sscan(r.Header.Get("X-Form"), &form)
		if err := forms[form](ctx, db); err != nil {
			return runtime.Response{}, fmt.Errorf("form %d: %w", form, err)
		}
		return created(""), nil
	})
	var wg sync.WaitGroup
	const per = 40
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				form := fmt.Sprint(i % len(forms))
				w := serve(h, req("t1", fmt.Sprintf("k-race-first-%d-%04d", g, i), body100, "X-Form", form))
				if w.Code != 201 {
					t.Errorf("request %d/%d (form %s): %d %s", g, i, form, w.Code, w.Body)
				}
			}
		}()
	}
	wg.Wait()
	if n := e.payments("t1"); n != 2*per {
		t.Errorf("payments %d, want %d", n, 2*per)
	}
}

// With a simple-protocol pool the claim and the handler's first statement are one
// multi-statement Query, which PostgreSQL parses whole before running any of it: a syntax error
// in the handler's statement comes back as the error of BEGIN. Nothing ran (the connection is
// outside any block), so the claim stays pending and the handler gets its own error: 500, as
// with the extended protocol, not 503 store-unavailable.
func TestSimpleProtocolSyntaxErrorIs500(t *testing.T) {
	e := newEnvAt(t, pgtest.NewDatabase(t)+"&default_query_exec_mode=simple_protocol", nil)
	fn := func(ctx context.Context, db pgstore.DBTX, _ *payReq) (runtime.Response, error) {
		if _, err := db.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2", "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		return created(""), nil
	}
	if w := serve(e.handlerWith(payOp(), fn), req("t1", key1, body100)); w.Code != 500 {
		t.Errorf("guarded: %d %s, want 500 (the handler's own syntax error)", w.Code, problemType(t, w))
	}
	op := payOp()
	op.Key.Required = false
	if w := serve(e.handlerWith(op, fn), req("t1", "", body100)); w.Code != 500 {
		t.Errorf("unguarded: %d %s, want 500 (the handler's own syntax error)", w.Code, problemType(t, w))
	}
}

// An argument pgx cannot encode in the handler's first statement fails in pgx's "build" step,
// after BEGIN and the lock statement were queued in the pipeline; pgx then closes the
// connection (an unfinished pipeline). Unlike a plain pgx transaction, the handler cannot go on
// after that error: the request ends with 500, nothing is committed, and the key stays free.
func TestEncodeErrorInFirstStatementIs500(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, _ *payReq) (runtime.Response, error) {
		if _, err := db.Exec(ctx, insertPay, "t1", make(chan int)); err == nil {
			return runtime.Response{}, errors.New("an unencodable argument was accepted")
		}
		if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
			return runtime.Response{}, fmt.Errorf("second statement: %w", err)
		}
		return created(""), nil
	})
	serve(h, req("t1", "k-warm-up-00000001", body100)) // the statement is in pgx's cache
	before := e.payments("t1")
	if w := serve(h, req("t1", key1, body100)); w.Code != 500 {
		t.Errorf("%d %s, want 500", w.Code, problemType(t, w))
	}
	if n := e.payments("t1") - before; n != 0 {
		t.Errorf("%d payments committed, want 0", n)
	}
	if e.records() != 0 {
		t.Errorf("a record was stored")
	}
}

// A first statement that pgx cannot prepare leaves the block pending with its timer still armed:
// a handler that handles that error and works on is claimed from the Delay on, so a duplicate
// meanwhile gets 409 (a timer stopped before the statement went out would leave the key
// unclaimed while the handler works).
func TestPreprocessingErrorKeepsTheTimer(t *testing.T) {
	e := newEnv(t, withDelay(20*time.Millisecond))
	started, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		if r.Header.Get("X-Slow") != "" {
			// A statement pgx cannot prepare (syntax error); the handler carries on.
			_, _ = db.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2", "t1", 100)
			close(started)
			<-release
		}
		if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		return created(""), nil
	})
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100, "X-Slow", "1")).Code }()
	<-started
	eventually(t, "the timer to send the claim alone", e.advisoryLockHeld)
	dup := serve(h, req("t1", key1, body100))
	close(release)
	firstCode := <-first
	if dup.Code != 409 {
		t.Errorf("duplicate while the first works: %d (replayed %q), want 409; the first request got %d",
			dup.Code, dup.Header().Get(runtime.HeaderReplayed), firstCode)
	}
	if firstCode != 201 {
		t.Errorf("first: %d", firstCode)
	}
}

// A handler that handles a failed statement and answers success anyway: PostgreSQL has aborted
// the transaction, so nothing it wrote can commit. The runtime answers 500 rather than the
// handler's 201, with a key and without.
func TestFailedStatementThenSuccessIs500(t *testing.T) {
	e := newEnv(t, nil)
	for _, required := range []bool{false, true} {
		op := payOp()
		op.Key.Required = required
		h := e.handlerWith(op, func(ctx context.Context, db pgstore.DBTX, _ *payReq) (runtime.Response, error) {
			if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
				return runtime.Response{}, err
			}
			var n int
			_ = db.QueryRow(ctx, "SELECT 1 / $1::int", 0).Scan(&n) // fails; handled
			return created(""), nil
		})
		key := ""
		if required {
			key = key1
		}
		if w := serve(h, req("t1", key, body100)); w.Code != 500 {
			t.Errorf("key required %v: %d, want 500", required, w.Code)
		}
		if n := e.payments("t1"); n != 0 {
			t.Errorf("key required %v: payments %d, want 0", required, n)
		}
	}
	if e.records() != 0 {
		t.Error("a record was stored")
	}
}

// The first statement's rows (read from the claim's pipeline) work with pgx's helpers:
// CollectRows and ForEachRow, CommandTag after the rows are closed, a partial read closed early
// followed by a second statement, and a QueryRow whose Scan fails followed by a second statement.
func TestFirstStatementRowsHelpers(t *testing.T) {
	e := newEnv(t, nil)
	errHandled := errors.New("statement failed as expected")
	forms := map[string]func(ctx context.Context, db pgstore.DBTX) error{
		"CollectRows": func(ctx context.Context, db pgstore.DBTX) error {
			rows, err := db.Query(ctx, "SELECT g FROM generate_series(1, $1::int) g", 3)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil || len(got) != 3 {
				return fmt.Errorf("CollectRows %v %v", got, err)
			}
			if ct := rows.CommandTag(); ct.String() != "SELECT 3" {
				return fmt.Errorf("CommandTag after close %q", ct)
			}
			_, err = db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"ForEachRow": func(ctx context.Context, db pgstore.DBTX) error {
			rows, err := db.Query(ctx, insertPay+" RETURNING id", "t1", 100)
			if err != nil {
				return err
			}
			var id int64
			ct, err := pgx.ForEachRow(rows, []any{&id}, func() error { return nil })
			if err != nil || ct.String() != "INSERT 0 1" || id == 0 {
				return fmt.Errorf("ForEachRow %q %d %v", ct, id, err)
			}
			return nil
		},
		"PartialThenClose": func(ctx context.Context, db pgstore.DBTX) error {
			rows, err := db.Query(ctx, "SELECT g FROM generate_series(1, $1::int) g", 1000)
			if err != nil {
				return err
			}
			if !rows.Next() {
				return fmt.Errorf("no row: %v", rows.Err())
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			_, err = db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"QueryRowScanError": func(ctx context.Context, db pgstore.DBTX) error {
			var b bool
			if err := db.QueryRow(ctx, "SELECT $1::text", "not a bool").Scan(&b); err == nil {
				return errors.New("scan of text into bool succeeded")
			}
			_, err := db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"StatementErrorInRows": func(ctx context.Context, db pgstore.DBTX) error {
			rows, err := db.Query(ctx, "SELECT 1 / $1::int", 0)
			if err != nil {
				return errHandled // reported at Query: fine too
			}
			for rows.Next() {
			}
			if rows.Err() == nil {
				return errors.New("division by zero not reported")
			}
			return errHandled
		},
	}
	for name, first := range forms {
		t.Run(name, func(t *testing.T) {
			h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, _ *payReq) (runtime.Response, error) {
				if err := first(ctx, db); err != nil {
					return runtime.Response{}, err
				}
				return created(name), nil
			})
			want := 201
			if name == "StatementErrorInRows" {
				want = 500
			}
			if w := serve(h, req("t1", "k-rows-helpers-"+name, body100)); w.Code != want {
				t.Errorf("%d %s, want %d", w.Code, w.Body, want)
			}
		})
	}
}

// A handler that returns a final answer while the rows of its first (pipelined) Query are still
// open commits nothing, the connection is not returned to the pool inside the block, and the
// key is free afterwards.
func TestOpenRowsAtReturnCommitNothing(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		rows, err := db.Query(ctx, insertPay+" RETURNING id", "t1", 100)
		if err != nil {
			return runtime.Response{}, err
		}
		if r.Header.Get("X-Leak") == "" {
			rows.Close()
		}
		return created(""), nil
	})
	if w := serve(h, req("t1", key1, body100, "X-Leak", "1")); w.Code == 201 {
		t.Errorf("open rows at return: 201")
	}
	if n := e.payments("t1"); n != 0 {
		t.Errorf("payments %d, want 0", n)
	}
	for i := range 20 { // every pooled connection is healthy and outside a block
		if w := serve(h, req("t1", fmt.Sprintf("k-after-leak-%04d", i), body100)); w.Code != 201 {
			t.Fatalf("request %d after the leak: %d %s", i, w.Code, w.Body)
		}
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Errorf("retry: %d, want a fresh 201", w.Code)
	}
}

// A duplicate whose first call is a form that sends the claim alone (a SAVEPOINT, which has no
// arguments; a batch; COPY) while the key is held gets the claim's error (store.ErrBusy) from
// that call and the client 409; nothing of it commits. (The old runtime's version began a
// savepoint with tx.Begin; DBTX has no Begin.)
func TestLostClaimSavepointFirst(t *testing.T) {
	forms := map[string]func(ctx context.Context, db pgstore.DBTX) error{
		"SavepointSQL": func(ctx context.Context, db pgstore.DBTX) error {
			if _, err := db.Exec(ctx, "SAVEPOINT s1"); err != nil {
				return err
			}
			_, _ = db.Exec(ctx, insertPay, "t1", 7)
			_, _ = db.Exec(ctx, "RELEASE SAVEPOINT s1")
			return nil
		},
		"SendBatch": func(ctx context.Context, db pgstore.DBTX) error {
			b := &pgx.Batch{}
			b.Queue(insertPay, "t1", 7)
			return db.SendBatch(ctx, b).Close()
		},
		"CopyFrom": func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.CopyFrom(ctx, pgx.Identifier{"payments"}, []string{"scope", "amount"}, pgx.CopyFromRows([][]any{{"t1", int64(7)}}))
			return err
		},
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			// The duplicate reads while the key is free (a duplicate that reads while the key is
			// held is answered 409 by the read), then waits before its first call until the
			// other request, on another replica (the duplicate's own Store would answer it 409
			// at once), holds the key; its claim goes out with that call (long Delay).
			e := newEnv(t, withDelay(time.Minute))
			other := newEnvAt(t, e.url, withDelay(time.Minute))
			firstErr := make(chan error, 1)
			read, holding := make(chan struct{}), make(chan struct{})
			handler := func(e *env) http.Handler {
				return e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
					if r.Header.Get("X-Hold") != "" {
						if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
							return runtime.Response{}, err
						}
						if err := e.pause(ctx, r); err != nil {
							return runtime.Response{}, err
						}
						return created(""), nil
					}
					close(read)
					<-holding
					err := form(ctx, db)
					firstErr <- err
					if err != nil {
						return runtime.Response{}, err
					}
					return created(""), nil
				})
			}
			h := handler(e)
			duplicate := make(chan int)
			go func() { duplicate <- serve(h, req("t1", key1, body100)).Code }()
			<-read
			first := make(chan int)
			go func() { first <- serve(handler(other), req("t1", key1, body100, "X-Hold", "holder")).Code }()
			g := other.gate("holder")
			g.wait(t)
			close(holding)
			if code := <-duplicate; code != 409 {
				t.Errorf("duplicate: %d, want 409", code)
			}
			if err := <-firstErr; !errors.Is(err, store.ErrBusy) {
				t.Errorf("first call: %v, want store.ErrBusy", err)
			}
			g.open()
			if code := <-first; code != 201 {
				t.Errorf("first: %d", code)
			}
			var dup int
			if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM payments WHERE amount = 7").Scan(&dup); err != nil || dup != 0 {
				t.Errorf("the duplicate's write committed: %d (%v)", dup, err)
			}
			if n := e.payments("t1"); n != 1 {
				t.Errorf("payments %d, want 1", n)
			}
		})
	}
}

// The client goes away while the pipelined claim + first statement is running on the server,
// for an operation whose handler stops with its client (execution.detach: false; a detached one
// completes, TestClientShorterThanTheHandler): the connection is closed (pgx's deadline
// handler), the statement's write never commits, no connection is left in a block, and the key
// is free for the retry.
func TestClientCancelDuringPipelinedClaim(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.Attached = true
	h := e.handlerWith(op, func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		q := insertPay
		if r.Header.Get("X-Slow") != "" {
			q = "INSERT INTO payments (scope, amount) SELECT $1, $2 FROM pg_sleep(1)"
		}
		if _, err := db.Exec(ctx, q, "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		return created(""), nil
	})
	sleeping := func(state string) bool {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%pg_sleep(1)%' AND query NOT LIKE '%pg_stat_activity%'
			AND ($1 = '' OR state = $1)`, state).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Slow", "1").WithContext(ctx)).Code }()
	eventually(t, "the statement to run on the server", func() bool { return sleeping("active") })
	cancel()
	if code := <-done; code == 201 {
		t.Errorf("canceled request answered 201")
	}
	// The server-side statement ends and its session goes away: nothing of it is left.
	eventually(t, "the canceled statement's session to end", func() bool { return !sleeping("") })
	if n := e.payments("t1"); n != 0 {
		t.Errorf("payments %d after the cancel, want 0", n)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Errorf("retry: %d %s, want a fresh 201", w.Code, w.Body)
	}
	for i := range 10 {
		if w := serve(h, req("t1", fmt.Sprintf("k-after-cancel-%04d", i), body100)); w.Code != 201 {
			t.Fatalf("request %d after the cancel: %d", i, w.Code)
		}
	}
}
