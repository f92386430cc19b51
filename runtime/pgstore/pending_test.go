package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Tests of ClaimWithStatement (pending.go): the claim that travels with the handler's first
// statement, and the timer that sends it alone when that statement is slow to come.

func withDelay(d time.Duration) func(*setup) {
	return withStrategy(pgstore.ClaimWithStatement{Delay: d})
}

func created(body string) runtime.Response {
	return runtime.Response{Status: http.StatusCreated, Body: []byte(body)}
}

// A handler that works a while before its first statement still holds the key from the
// strategy's Delay on: a duplicate then gets 409, and the first request's claim cost one round
// trip of its own (handler statements + 3).
func TestClaimDelaySendsTheClaimAlone(t *testing.T) {
	e := newEnv(t, withDelay(20*time.Millisecond))
	started, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		if r.Header.Get("X-Slow") != "" {
			close(started)
			<-release // work before the first statement
		}
		if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		return created(`{"ok":true}`), nil
	})
	serve(h, req("t1", "k-warm-up-00000001", body100))

	done := make(chan int64)
	go func() {
		n, _, _ := e.rtt.count(func() {
			if w := serve(h, req("t1", key1, body100, "X-Slow", "1")); w.Code != 201 {
				t.Errorf("first: %d %s", w.Code, w.Body)
			}
		})
		done <- n
	}()
	<-started
	eventually(t, "the timer to send the claim alone", e.advisoryLockHeld)
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight {
		t.Errorf("duplicate while the first works before its statement: %d, want 409 in-flight", w.Code)
	}
	close(release)
	if n := <-done; n < 4 {
		t.Errorf("first request: %d round trips traced, want at least 4 (read, claim alone, statement, record+COMMIT)", n)
	}
	if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("retry: %d, want the replay", w.Code)
	}
	if n := e.payments("t1"); n != 2 {
		t.Errorf("payments %d, want 2 (warm-up and the first request)", n)
	}
}

// A duplicate whose claim, sent alone by the timer, finds the key taken is answered 409 at once:
// its handler's context is canceled (cause runtime.ErrClaimLost, wrapping store.ErrBusy)
// instead of being waited for. Here the duplicate reads first, while nobody holds the key, and
// starts long work; the other request then claims the key with its first statement and holds
// it; the duplicate's timer claim fails.
func TestLostClaimCancelsTheHandler(t *testing.T) {
	// The other request must claim the key before the duplicate's timer sends its claim: the
	// delay leaves it time on a loaded machine.
	e := newEnv(t, withDelay(2*time.Second))
	// The other request runs on another replica: on the duplicate's own Store it would be
	// answered 409 at once (the Store's claims in progress).
	other := newEnvAt(t, e.url, withDelay(2*time.Second))
	waiting, holding, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	causes := make(chan error, 1)
	handler := func(e *env) http.Handler {
		return e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
			if r.Header.Get("X-Wait") != "" {
				close(waiting)
				select { // long work before the first statement, abandoned when ctx ends
				case <-ctx.Done():
					causes <- context.Cause(ctx)
					return runtime.Response{}, ctx.Err()
				case <-time.After(time.Minute):
					return runtime.Response{}, errors.New("not canceled")
				}
			}
			if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
				return runtime.Response{}, err
			}
			close(holding)
			<-release
			return created(""), nil
		})
	}
	h := handler(e)
	duplicate := make(chan int)
	go func() { duplicate <- serve(h, req("t1", key1, body100, "X-Wait", "1")).Code }()
	<-waiting
	first := make(chan int)
	go func() { first <- serve(handler(other), req("t1", key1, body100)).Code }()
	select {
	case <-holding:
	case code := <-first:
		t.Fatalf("the other request did not get the key: %d", code)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, runtime.ErrClaimLost) || !errors.Is(cause, store.ErrBusy) {
			t.Errorf("handler context cause %v, want ErrClaimLost wrapping store.ErrBusy", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate's handler context was not canceled")
	}
	if code := <-duplicate; code != 409 {
		t.Errorf("duplicate: %d, want 409", code)
	}
	close(release)
	if code := <-first; code != 201 {
		t.Errorf("first: %d", code)
	}
	if n := e.payments("t1"); n != 1 {
		t.Errorf("payments %d, want 1", n)
	}
}

// A duplicate that read while the key was free, and whose statement comes after another request
// claimed the key, meets the lock in that statement's round trip: the statement never runs (the
// pipeline stops at the failed lock), 409. (A duplicate that reads while the key is held is
// answered 409 by the read: TestServerLogHoldsNoKeysAndNo409Errors.)
func TestLostClaimSkipsTheStatement(t *testing.T) {
	e := newEnv(t, withDelay(time.Minute))
	// The holder runs on another replica: on the duplicate's own Store it would be answered
	// 409 at once (the Store's claims in progress).
	other := newEnvAt(t, e.url, withDelay(time.Minute))
	holding, release := make(chan struct{}), make(chan struct{})
	read, go2 := make(chan struct{}), make(chan struct{})
	stmtErr := make(chan error, 1)
	handler := func(e *env) http.Handler {
		return e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
			if r.Header.Get("X-Hold") == "" {
				close(read)
				<-go2
			}
			_, err := db.Exec(ctx, insertPay, "t1", 100)
			if r.Header.Get("X-Hold") == "" {
				stmtErr <- err
			}
			if err != nil {
				return runtime.Response{}, err
			}
			if r.Header.Get("X-Hold") != "" {
				close(holding)
				<-release
			}
			return created(""), nil
		})
	}
	h := handler(e)
	duplicate := make(chan int)
	go func() { duplicate <- serve(h, req("t1", key1, body100)).Code }()
	<-read
	first := make(chan int)
	go func() { first <- serve(handler(other), req("t1", key1, body100, "X-Hold", "1")).Code }()
	<-holding
	close(go2)
	if code := <-duplicate; code != 409 {
		t.Errorf("duplicate: %d, want 409", code)
	}
	if err := <-stmtErr; !errors.Is(err, store.ErrBusy) {
		t.Errorf("the duplicate's statement returned %v, want store.ErrBusy", err)
	}
	close(release)
	<-first
	// A rolled-back INSERT leaves no row but still advances the sequence: it stays at 1 only if
	// the duplicate's INSERT never ran.
	var last int64
	if err := e.pool.QueryRow(context.Background(), "SELECT last_value FROM payments_id_seq").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last != 1 {
		t.Errorf("payments_id_seq at %d, want 1: the duplicate's statement ran", last)
	}
}

// The first statement may be any form DBTX offers: Query with rows read to the end, QueryRow,
// or a form that cannot join the claim's pipeline (a batch, COPY, named arguments, an exec-mode
// option, a statement without arguments such as SAVEPOINT), which sends the claim alone first.
// Each stores its record and replays. (pgx.Tx's Begin, Prepare, LargeObjects and Conn are not
// part of DBTX: savepoints are plain statements.)
func TestFirstStatementForms(t *testing.T) {
	forms := map[string]func(ctx context.Context, db pgstore.DBTX) error{
		"Query": func(ctx context.Context, db pgstore.DBTX) error {
			rows, err := db.Query(ctx, insertPay+" RETURNING id", "t1", 100)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil || n != 1 {
				return fmt.Errorf("rows: %d %v", n, err)
			}
			return nil
		},
		"QueryRow": func(ctx context.Context, db pgstore.DBTX) error {
			var id int64
			return db.QueryRow(ctx, insertPay+" RETURNING id", "t1", 100).Scan(&id)
		},
		"QueryRowNoRows": func(ctx context.Context, db pgstore.DBTX) error {
			var id int64
			if err := db.QueryRow(ctx, "SELECT id FROM payments WHERE scope = $1 AND amount < 0", "t1").Scan(&id); !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("want ErrNoRows, got %v", err)
			}
			_, err := db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"SendBatch": func(ctx context.Context, db pgstore.DBTX) error {
			b := &pgx.Batch{}
			b.Queue(insertPay, "t1", 100)
			b.Queue(insertPay, "t1", 101)
			return db.SendBatch(ctx, b).Close()
		},
		"CopyFrom": func(ctx context.Context, db pgstore.DBTX) error {
			n, err := db.CopyFrom(ctx, pgx.Identifier{"payments"}, []string{"scope", "amount"},
				pgx.CopyFromRows([][]any{{"t1", int64(100)}, {"t1", int64(101)}}))
			if err == nil && n != 2 {
				err = fmt.Errorf("copied %d rows", n)
			}
			return err
		},
		"NamedArgs": func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES (@scope, @amount)",
				pgx.NamedArgs{"scope": "t1", "amount": 100})
			return err
		},
		"ExecMode": func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, insertPay, pgx.QueryExecModeSimpleProtocol, "t1", 100)
			return err
		},
		"NoArguments": func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ('t1', 1); INSERT INTO payments (scope, amount) VALUES ('t1', 2)")
			return err
		},
		"SavepointSQL": func(ctx context.Context, db pgstore.DBTX) error {
			if _, err := db.Exec(ctx, "SAVEPOINT s1"); err != nil {
				return err
			}
			if _, err := db.Exec(ctx, insertPay, "t1", 999); err != nil {
				return err
			}
			if _, err := db.Exec(ctx, "ROLLBACK TO SAVEPOINT s1"); err != nil {
				return err
			}
			_, err := db.Exec(ctx, insertPay, "t1", 100)
			return err
		},
	}
	e := newEnv(t, nil)
	for name, first := range forms {
		t.Run(name, func(t *testing.T) {
			h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, _ *payReq) (runtime.Response, error) {
				if err := first(ctx, db); err != nil {
					return runtime.Response{}, err
				}
				return created(name), nil
			})
			key := "k-first-statement-" + name
			before := e.payments("t1")
			if w := serve(h, req("t1", key, body100)); w.Code != 201 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if w := serve(h, req("t1", key, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" || w.Body.String() != name {
				t.Errorf("retry %d %q, want the replay", w.Code, w.Body)
			}
			if n := e.payments("t1") - before; n < 1 {
				t.Errorf("%d payments written", n)
			}
		})
	}
	var rolledBack int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM payments WHERE amount = 999").Scan(&rolledBack); err != nil || rolledBack != 0 {
		t.Errorf("the write rolled back to the savepoint committed: %d (%v)", rolledBack, err)
	}
}

// A first statement that fails leaves the handler with an error: 500, everything rolled back,
// the key free for the retry.
func TestFailingFirstStatementFreesTheKey(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		sql := insertPay
		if r.Header.Get("X-Broken") != "" {
			sql = "INSERT INTO no_such_table (scope, amount) VALUES ($1, $2)"
		}
		if _, err := db.Exec(ctx, sql, "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		return created(""), nil
	})
	if w := serve(h, req("t1", key1, body100, "X-Broken", "1")); w.Code != 500 {
		t.Errorf("broken statement: %d, want 500", w.Code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Errorf("retry: %d, want a fresh 201", w.Code)
	}
}

// A handler that sends no statement still gets its final answer stored (the claim goes alone
// at completion) and replayed; one that answers a non-final status leaves nothing behind.
func TestHandlerWithoutStatements(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(_ context.Context, _ pgstore.DBTX, r *payReq) (runtime.Response, error) {
		if r.Header.Get("X-Busy") != "" {
			return runtime.Response{Status: http.StatusServiceUnavailable}, nil
		}
		return runtime.Response{Status: http.StatusAccepted, Body: []byte("queued")}, nil
	})
	if w := serve(h, req("t1", key1, body100, "X-Busy", "1")); w.Code != 503 {
		t.Fatalf("non-final: %d", w.Code)
	}
	if n := e.records(); n != 0 {
		t.Fatalf("records after a non-final answer: %d", n)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 202 || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Fatalf("first final: %d", w.Code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 202 || w.Header().Get(runtime.HeaderReplayed) != "true" || w.Body.String() != "queued" {
		t.Errorf("retry: %d %q, want the replay", w.Code, w.Body)
	}
}

// The rare race the statement-carried claim does not re-read for: another request completes the
// key after our read and before our lock. Our handler runs, the record's INSERT meets the other
// record (unique_violation), everything of ours rolls back, and the request is answered from the
// other record: a replay when it is the same request. A handler error in that situation is
// answered from the other record too.
func TestCompletedBetweenReadAndLock(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	// The fingerprint the runtime gives this request: the same request under another key.
	if w := serve(e.atomicHandler(op), req("t1", "k-fingerprint-source-01", body100)); w.Code != 201 {
		t.Fatal(w.Code)
	}
	var fp []byte
	var version int16
	if err := e.pool.QueryRow(context.Background(), `SELECT fingerprint, fingerprint_version FROM idempotency_records
		WHERE key_id = $1`, keyID("t1", "k-fingerprint-source-01")).Scan(&fp, &version); err != nil {
		t.Fatal(err)
	}
	h := e.handlerWith(op, func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		// The other request commits its record now, before our first statement takes the lock.
		if err := e.insertRecord(ctx, testRecord{scope: "t1", key: r.Header.Get("Idempotency-Key"), operation: op.ID,
			fingerprint: fp, version: version, status: 201, token: 7, body: `{"winner":true}`, expiresIn: time.Hour}); err != nil {
			return runtime.Response{}, err
		}
		if _, err := db.Exec(ctx, insertPay, "t1", 100); err != nil {
			return runtime.Response{}, err
		}
		if r.Header.Get("X-Fail") != "" {
			return runtime.Response{}, errors.New("handler error")
		}
		return created(`{"winner":false}`), nil
	})
	before := e.payments("t1")
	for _, fail := range []string{"", "error"} {
		key := key1 + fail
		w := serve(h, req("t1", key, body100, "X-Fail", fail))
		if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "true" || w.Body.String() != `{"winner":true}` {
			t.Errorf("fail %q: got %d %q (replayed %q), want the other request's replay", fail, w.Code, w.Body, w.Header().Get(runtime.HeaderReplayed))
		}
	}
	if n := e.payments("t1") - before; n != 0 {
		t.Errorf("payments %d, want 0: our writes roll back", n)
	}
}

// A handle used after its transaction ended (a handler that kept it; a framework bridge such as
// fiber's adaptor.HTTPMiddleware, which runs the handler after the middleware has finished the
// request) gets store.ErrTxDone from every method, whatever the claim strategy, never a panic
// on a connection given back to the pool, and nothing it sends runs.
func TestHandleAfterTheTransactionEnded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy pgstore.ClaimStrategy
	}{
		{"with-statement", pgstore.ClaimWithStatement{}},
		{"read-first", pgstore.ClaimReadFirst{}},
		{"pipelined", pgstore.ClaimPipelined{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withStrategy(tc.strategy))
			var kept pgstore.DBTX
			h := e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
				kept = db
				if r.Header.Get("X-Status") == "500" {
					return runtime.Response{Status: http.StatusInternalServerError}, nil // rolled back
				}
				return created(`{}`), nil
			})
			for _, status := range []string{"201", "500"} {
				w := serve(h, req("t1", "k-after-the-end-"+status, body100, "X-Status", status))
				if w.Code == 0 || kept == nil {
					t.Fatalf("%s: the handler did not run: %d", status, w.Code)
				}
				ctx := context.Background()
				if _, err := kept.Exec(ctx, insertPay, "t1", 100); !errors.Is(err, store.ErrTxDone) {
					t.Errorf("%s: Exec after the end: %v, want store.ErrTxDone", status, err)
				}
				if _, err := kept.Query(ctx, "SELECT 1"); !errors.Is(err, store.ErrTxDone) {
					t.Errorf("%s: Query after the end: %v, want store.ErrTxDone", status, err)
				}
				var one int
				if err := kept.QueryRow(ctx, "SELECT 1").Scan(&one); !errors.Is(err, store.ErrTxDone) {
					t.Errorf("%s: QueryRow after the end: %v, want store.ErrTxDone", status, err)
				}
				if _, err := kept.CopyFrom(ctx, pgx.Identifier{"payments"}, []string{"scope"}, pgx.CopyFromRows(nil)); !errors.Is(err, store.ErrTxDone) {
					t.Errorf("%s: CopyFrom after the end: %v, want store.ErrTxDone", status, err)
				}
				b := &pgx.Batch{}
				b.Queue("SELECT 1")
				if err := kept.SendBatch(ctx, b).Close(); !errors.Is(err, store.ErrTxDone) {
					t.Errorf("%s: SendBatch after the end: %v, want store.ErrTxDone", status, err)
				}
			}
			if n := e.payments("t1"); n != 0 {
				t.Errorf("%d payments written after the end, want 0", n)
			}
		})
	}
}
