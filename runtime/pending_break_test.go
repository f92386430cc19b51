package runtime

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

	"github.com/idemgen/idemgen/internal/pgtest"
)

// Adversarial tests of ClaimWithStatement (pending.go, tx.go, atomic.go), written by a tester
// trying to break it: each pins a behaviour that was suspected, or found broken and fixed.

// A timer callback that fired but had not got the block's mutex when the handler returned must
// do nothing (pendingBlock.settled): the runtime has taken the connection back and may already
// have released it to the pool. Found by a tester: the callback used a released pgxpool.Conn,
// a nil dereference in a timer goroutine that killed the process. Handlers here return, without
// a statement, around the moment the timer fires.
func TestTimerCallbackAfterSettleDoesNothing(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClaimDelay = time.Millisecond })
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			// Return, without a statement, around the moment the timer fires.
			d := time.Duration(700+rand.IntN(600)) * time.Microsecond
			end := time.Now().Add(d)
			for time.Now().Before(end) {
			}
			if r.Header.Get("X-Err") != "" {
				return Response{}, errors.New("handler error")
			}
			return Response{Status: http.StatusServiceUnavailable}, nil // non-final: released
		}
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
}

// Prepare goes through the pending block's mutex like every statement, so it never uses the
// connection at the same time as the timer's claim (found by a tester: "conn busy", then 503).
func TestPrepareWaitsForTheTimerClaim(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClaimDelay = 3 * time.Millisecond })
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			end := time.Now().Add(40 * time.Millisecond)
			for i := 0; time.Now().Before(end); i++ {
				if _, err := tx.Prepare(ctx, fmt.Sprintf("p%d", i), fmt.Sprintf("SELECT $1::int + %d", i)); err != nil {
					return Response{}, fmt.Errorf("prepare %d: %w", i, err)
				}
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	for i := range 5 {
		if w := serve(h, req("t1", fmt.Sprintf("k-prepare-race-%04d", i), body100)); w.Code != 201 {
			t.Errorf("request %d: %d %s, want 201", i, w.Code, w.Body)
		}
	}
}

// With a simple-protocol pool the claim and the handler's first statement are one
// multi-statement Query, which PostgreSQL parses whole before running any of it: a syntax error
// in the handler's statement comes back as the error of BEGIN. Nothing ran (the connection is
// outside any block), so the claim stays pending and the handler gets its own error: 500, as
// with the extended protocol, not 503 store-unavailable (found by a tester).
func TestSimpleProtocolSyntaxErrorIs500(t *testing.T) {
	e := newEnvAt(t, pgtest.NewDatabase(t)+"&default_query_exec_mode=simple_protocol", nil)
	fn := func(*http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if _, err := tx.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2", "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated}, nil
		}
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
// after that error: the request ends with 500 (errStatementNotSent), nothing is committed, and
// the key stays free (docs/runtime.md).
func TestEncodeErrorInFirstStatementIs500(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if _, err := tx.Exec(ctx, insertPay, "t1", make(chan int)); err == nil {
				return Response{}, errors.New("an unencodable argument was accepted")
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, fmt.Errorf("second statement: %w", err)
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	serve(h, req("t1", "k-warm-up-00000001", body100)) // the statement is in pgx's cache
	before := e.payments("t1")
	if w := serve(h, req("t1", key1, body100)); w.Code != 500 {
		t.Errorf("%d %s, want 500", w.Code, problemType(t, w))
	}
	if n := e.payments("t1") - before; n != 0 {
		t.Errorf("%d payments committed, want 0", n)
	}
}

// A first statement that pgx cannot prepare leaves the block pending with its timer still armed:
// a handler that handles that error and works on is claimed from ClaimDelay on, so a duplicate
// meanwhile gets 409 (found by a tester: the timer had been stopped before the statement went out).
func TestPreprocessingErrorKeepsTheTimer(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClaimDelay = 20 * time.Millisecond })
	started, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if r.Header.Get("X-Slow") != "" {
				// A statement pgx cannot prepare (syntax error); the handler carries on.
				_, _ = tx.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2", "t1", 100)
				close(started)
				<-release
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100, "X-Slow", "1")).Code }()
	<-started
	time.Sleep(150 * time.Millisecond) // well past ClaimDelay
	dup := serve(h, req("t1", key1, body100))
	close(release)
	firstCode := <-first
	if dup.Code != 409 {
		t.Errorf("duplicate while the first works: %d (replayed %q), want 409; the first request got %d",
			dup.Code, dup.Header().Get(HeaderReplayed), firstCode)
	}
}

// A handler that handles a failed statement and answers success anyway: PostgreSQL has aborted
// the transaction, so nothing it wrote can commit. The runtime answers 500 rather than the
// handler's 201 (found by a tester: the unguarded path's COMMIT answered ROLLBACK unchecked).
func TestFailedStatementThenSuccessIs500(t *testing.T) {
	e := newEnv(t, nil)
	for _, required := range []bool{false, true} {
		op := payOp()
		op.Key.Required = required
		h := e.handlerWith(op, func(*http.Request) AtomicFunc {
			return func(ctx context.Context, tx pgx.Tx) (Response, error) {
				if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
					return Response{}, err
				}
				var n int
				_ = tx.QueryRow(ctx, "SELECT 1 / $1::int", 0).Scan(&n) // fails; handled
				return Response{Status: http.StatusCreated}, nil
			}
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
}

// Holds: pgx.CollectRows and pgx.ForEachRow over the first statement's batchRows, CommandTag
// after the rows are closed, a partial read closed early followed by a second statement, and a
// QueryRow whose Scan fails followed by a second statement.
func TestFirstStatementRowsHelpers(t *testing.T) {
	e := newEnv(t, nil)
	forms := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"CollectRows": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT g FROM generate_series(1, $1::int) g", 3)
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
			_, err = tx.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"ForEachRow": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, insertPay+" RETURNING id", "t1", 100)
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
		"PartialThenClose": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT g FROM generate_series(1, $1::int) g", 1000)
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
			_, err = tx.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"QueryRowScanError": func(ctx context.Context, tx pgx.Tx) error {
			var b bool
			if err := tx.QueryRow(ctx, "SELECT $1::text", "not a bool").Scan(&b); err == nil {
				return errors.New("scan of text into bool succeeded")
			}
			_, err := tx.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"StatementErrorInRows": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT 1 / $1::int", 0)
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
		h := e.handlerWith(payOp(), func(*http.Request) AtomicFunc {
			return func(ctx context.Context, tx pgx.Tx) (Response, error) {
				if err := first(ctx, tx); err != nil {
					return Response{}, err
				}
				return Response{Status: http.StatusCreated, Body: []byte(name)}, nil
			}
		})
		want := 201
		if name == "StatementErrorInRows" {
			want = 500
		}
		if w := serve(h, req("t1", "k-rows-helpers-"+name, body100)); w.Code != want {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body, want)
		}
	}
}

var errHandled = errors.New("statement failed as expected")

// Holds: a handler that returns a final answer while the rows of its first (pipelined) Query
// are still open commits nothing (the record's INSERT meets "conn busy"; 503), the connection
// is not returned to the pool inside the block (pgxpool destroys the busy connection: the
// stale TxStatus 'I' made rollback skip its ROLLBACK), and the key is free afterwards.
func TestOpenRowsAtReturnCommitNothing(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			rows, err := tx.Query(ctx, insertPay+" RETURNING id", "t1", 100)
			if err != nil {
				return Response{}, err
			}
			if r.Header.Get("X-Leak") == "" {
				rows.Close()
			}
			return Response{Status: http.StatusCreated}, nil
		}
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
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("retry: %d, want a fresh 201", w.Code)
	}
}

// Holds: a duplicate whose handler starts with tx.Conn() while the key is held: the claim goes
// alone, fails (the block is left open by lockAtomic), Conn() returns the connection inside that
// block, and what the handler writes there rolls back; 409.
func TestLostClaimConnWritesRollBack(t *testing.T) {
	e := newEnv(t, nil)
	holding, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if r.Header.Get("X-Hold") != "" {
				if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
					return Response{}, err
				}
				close(holding)
				<-release
				return Response{Status: http.StatusCreated}, nil
			}
			conn := tx.Conn()
			_, _ = conn.Exec(ctx, insertPay, "t1", 7) // whatever happens, must not commit
			return Response{Status: http.StatusCreated}, nil
		}
	})
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "1")).Code }()
	<-holding
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 {
		t.Errorf("duplicate via Conn(): %d, want 409", w.Code)
	}
	close(release)
	if code := <-first; code != 201 {
		t.Errorf("first: %d", code)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM payments WHERE amount = 7").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the duplicate's write through Conn() committed")
	}
}

// Holds: a duplicate whose first call is tx.Begin (a savepoint) while the key is held gets the
// claim's error from Begin and the client 409; nothing of it commits.
func TestLostClaimSavepointFirst(t *testing.T) {
	e := newEnv(t, nil)
	holding, release := make(chan struct{}), make(chan struct{})
	beginErr := make(chan error, 1)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if r.Header.Get("X-Hold") != "" {
				if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
					return Response{}, err
				}
				close(holding)
				<-release
				return Response{Status: http.StatusCreated}, nil
			}
			sp, err := tx.Begin(ctx)
			beginErr <- err
			if err != nil {
				return Response{}, err
			}
			_, _ = sp.Exec(ctx, insertPay, "t1", 7)
			_ = sp.Commit(ctx)
			return Response{Status: http.StatusCreated}, nil
		}
	})
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "1")).Code }()
	<-holding
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 {
		t.Errorf("duplicate with a savepoint first: %d, want 409", w.Code)
	}
	if err := <-beginErr; !errors.Is(err, errClaimBusy) {
		t.Errorf("Begin: %v, want errClaimBusy", err)
	}
	close(release)
	<-first
	if n := e.payments("t1"); n != 1 {
		t.Errorf("payments %d, want 1", n)
	}
}

// Holds: the client goes away while the pipelined claim + first statement is running on the
// server: the connection is closed (pgx's deadline handler), the statement's write never
// commits, no connection is left in a block, and the key is free for the retry.
func TestClientCancelDuringPipelinedClaim(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			q := insertPay
			if r.Header.Get("X-Slow") != "" {
				q = "INSERT INTO payments (scope, amount) SELECT $1, $2 FROM pg_sleep(0.3)"
			}
			if _, err := tx.Exec(ctx, q, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := req("t1", key1, body100, "X-Slow", "1").WithContext(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if w := serve(h, r); w.Code == 201 {
		t.Errorf("canceled request answered 201")
	}
	time.Sleep(600 * time.Millisecond) // the server-side statement ends and its block aborts
	if n := e.payments("t1"); n != 0 {
		t.Errorf("payments %d after the cancel, want 0", n)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("retry: %d %s, want a fresh 201", w.Code, w.Body)
	}
	for i := range 10 {
		if w := serve(h, req("t1", fmt.Sprintf("k-after-cancel-%04d", i), body100)); w.Code != 201 {
			t.Fatalf("request %d after the cancel: %d", i, w.Code)
		}
	}
}
