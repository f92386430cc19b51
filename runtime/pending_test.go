package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tests of ClaimWithStatement (pending.go): the claim that travels with the handler's first
// statement, and the timer that sends it alone when that statement is slow to come.

// handlerWith plays generated code around fn: the atomic-mode operation op, the test
// fingerprint, and fn as the business handler.
func (e *env) handlerWith(op *Operation, fn func(r *http.Request) AtomicFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x, ok := e.rt.Begin(w, r, op)
		if !ok {
			return
		}
		x.RunAtomic(x.HeaderKey(), testFingerprint(op, x.Body()), fn(r))
	})
}

const insertPay = "INSERT INTO payments (scope, amount) VALUES ($1, $2)"

// A handler that works a while before its first statement still holds the key from
// Config.ClaimDelay on: a duplicate then gets 409, and the first request's claim cost one round
// trip of its own (handler statements + 3).
func TestClaimDelaySendsTheClaimAlone(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClaimDelay = 20 * time.Millisecond })
	started, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if r.Header.Get("X-Slow") != "" {
				close(started)
				<-release // work before the first statement
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated, Body: []byte(`{"ok":true}`)}, nil
		}
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
	time.Sleep(100 * time.Millisecond) // five times ClaimDelay: the claim went out alone
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 || problemType(t, w) != ProblemInFlight {
		t.Errorf("duplicate while the first works before its statement: %d, want 409 in-flight", w.Code)
	}
	close(release)
	if n := <-done; n < 4 {
		t.Errorf("first request: %d round trips traced, want at least 4 (read, claim alone, statement, record+COMMIT)", n)
	}
	if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
		t.Errorf("retry: %d, want the replay", w.Code)
	}
	if n := e.payments("t1"); n != 2 {
		t.Errorf("payments %d, want 2 (warm-up and the first request)", n)
	}
}

// A duplicate whose claim, sent alone by the timer, finds the key taken is answered 409 at once:
// its handler's context is canceled (cause ErrClaimLost) instead of being waited for. Here the
// duplicate reads first, while nobody holds the key, and starts long work; the other request
// then claims the key with its first statement and holds it; the duplicate's timer claim fails.
func TestLostClaimCancelsTheHandler(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClaimDelay = 300 * time.Millisecond })
	waiting, holding, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	causes := make(chan error, 1)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if r.Header.Get("X-Wait") != "" {
				close(waiting)
				select { // long work before the first statement, abandoned when ctx ends
				case <-ctx.Done():
					causes <- context.Cause(ctx)
					return Response{}, ctx.Err()
				case <-time.After(time.Minute):
					return Response{}, errors.New("not canceled")
				}
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			close(holding)
			<-release
			return Response{Status: http.StatusCreated}, nil
		}
	})
	duplicate := make(chan int)
	go func() { duplicate <- serve(h, req("t1", key1, body100, "X-Wait", "1")).Code }()
	<-waiting
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100)).Code }()
	<-holding
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrClaimLost) || !errors.Is(cause, errClaimBusy) {
			t.Errorf("handler context cause %v, want ErrClaimLost wrapping errClaimBusy", cause)
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

// A duplicate whose handler goes straight to its statement meets the lock in that statement's
// round trip: the statement never runs (the pipeline stops at the failed lock), 409.
func TestLostClaimSkipsTheStatement(t *testing.T) {
	e := newEnv(t, nil)
	holding, release := make(chan struct{}), make(chan struct{})
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			if r.Header.Get("X-Hold") != "" {
				close(holding)
				<-release
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	first := make(chan int)
	go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "1")).Code }()
	<-holding
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 {
		t.Errorf("duplicate: %d, want 409", w.Code)
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

// The first statement may be any query form: Query with rows read to the end, QueryRow, or a
// form that cannot join the claim's pipeline (a batch, named arguments, an exec-mode option),
// which sends the claim alone first. Each stores its record and replays.
func TestFirstStatementForms(t *testing.T) {
	forms := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"Query": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, insertPay+" RETURNING id", "t1", 100)
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
		"QueryRow": func(ctx context.Context, tx pgx.Tx) error {
			var id int64
			return tx.QueryRow(ctx, insertPay+" RETURNING id", "t1", 100).Scan(&id)
		},
		"QueryRowNoRows": func(ctx context.Context, tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, "SELECT id FROM payments WHERE scope = $1 AND amount < 0", "t1").Scan(&id); !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("want ErrNoRows, got %v", err)
			}
			_, err := tx.Exec(ctx, insertPay, "t1", 100)
			return err
		},
		"SendBatch": func(ctx context.Context, tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(insertPay, "t1", 100)
			return tx.SendBatch(ctx, b).Close()
		},
		"NamedArgs": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES (@scope, @amount)",
				pgx.NamedArgs{"scope": "t1", "amount": 100})
			return err
		},
		"ExecMode": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insertPay, pgx.QueryExecModeSimpleProtocol, "t1", 100)
			return err
		},
		"NoArguments": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ('t1', 1); INSERT INTO payments (scope, amount) VALUES ('t1', 2)")
			return err
		},
		"Savepoint": func(ctx context.Context, tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, insertPay, "t1", 100); err != nil {
				return err
			}
			return sp.Commit(ctx)
		},
	}
	e := newEnv(t, nil)
	for name, first := range forms {
		h := e.handlerWith(payOp(), func(*http.Request) AtomicFunc {
			return func(ctx context.Context, tx pgx.Tx) (Response, error) {
				if err := first(ctx, tx); err != nil {
					return Response{}, err
				}
				return Response{Status: http.StatusCreated, Body: []byte(name)}, nil
			}
		})
		key := "k-first-statement-" + name
		before := e.payments("t1")
		if w := serve(h, req("t1", key, body100)); w.Code != 201 {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
			continue
		}
		if w := serve(h, req("t1", key, body100)); w.Header().Get(HeaderReplayed) != "true" || w.Body.String() != name {
			t.Errorf("%s: retry %d %q, want the replay", name, w.Code, w.Body)
		}
		if n := e.payments("t1") - before; n < 1 {
			t.Errorf("%s: %d payments written", name, n)
		}
	}
}

// A first statement that fails leaves the handler with an error: 500, everything rolled back,
// the key free for the retry.
func TestFailingFirstStatementFreesTheKey(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			sql := insertPay
			if r.Header.Get("X-Broken") != "" {
				sql = "INSERT INTO no_such_table (scope, amount) VALUES ($1, $2)"
			}
			if _, err := tx.Exec(ctx, sql, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated}, nil
		}
	})
	if w := serve(h, req("t1", key1, body100, "X-Broken", "1")); w.Code != 500 {
		t.Errorf("broken statement: %d, want 500", w.Code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("retry: %d, want a fresh 201", w.Code)
	}
}

// A handler that sends no statement still gets its final answer stored (the claim goes alone
// at completion) and replayed; one that answers a non-final status leaves nothing behind.
func TestHandlerWithoutStatements(t *testing.T) {
	e := newEnv(t, nil)
	h := e.handlerWith(payOp(), func(r *http.Request) AtomicFunc {
		return func(context.Context, pgx.Tx) (Response, error) {
			if r.Header.Get("X-Busy") != "" {
				return Response{Status: http.StatusServiceUnavailable}, nil
			}
			return Response{Status: http.StatusAccepted, Body: []byte("queued")}, nil
		}
	})
	if w := serve(h, req("t1", key1, body100, "X-Busy", "1")); w.Code != 503 {
		t.Fatalf("non-final: %d", w.Code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 202 || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first final: %d", w.Code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 202 || w.Header().Get(HeaderReplayed) != "true" || w.Body.String() != "queued" {
		t.Errorf("retry: %d %q, want the replay", w.Code, w.Body)
	}
}

// The rare race the statement-carried claim does not re-read for: another request completes the
// key after our read and before our lock. Our handler runs, the record's INSERT meets the other
// record (unique_violation), everything of ours rolls back, and the request is answered from the
// other record: a replay when it is the same request.
func TestCompletedBetweenReadAndLock(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	fp := testFingerprint(op, []byte(body100))
	h := e.handlerWith(op, func(r *http.Request) AtomicFunc {
		return func(ctx context.Context, tx pgx.Tx) (Response, error) {
			// The other request commits its record now, before our first statement takes the lock.
			if _, err := e.pool.Exec(ctx, `INSERT INTO idempotency_records
				(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
				 response_status, response_body, created_at, completed_at, expires_at)
				VALUES ('t1', $1, $2, $3, $4, 'completed', 7, 201, '{"winner":true}', now(), now(), now() + interval '1 hour')`,
				key1, op.ID, fp.Sum[:], int16(fp.Version)); err != nil {
				return Response{}, err
			}
			if _, err := tx.Exec(ctx, insertPay, "t1", 100); err != nil {
				return Response{}, err
			}
			return Response{Status: http.StatusCreated, Body: []byte(`{"winner":false}`)}, nil
		}
	})
	w := serve(h, req("t1", key1, body100))
	if w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" || w.Body.String() != `{"winner":true}` {
		t.Errorf("got %d %q (replayed %q), want the other request's replay", w.Code, w.Body, w.Header().Get(HeaderReplayed))
	}
	if n := e.payments("t1"); n != 0 {
		t.Errorf("payments %d, want 0: our write rolls back", n)
	}
}

// An optional key that is absent runs the handler unguarded: BEGIN travels with its first
// statement, so it costs its statements plus the COMMIT, as in a plain pgx transaction.
func TestUnguardedRoundTrips(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.Key.Required = false
	h := e.atomicHandler(op)
	serve(h, req("t1", "", body100))
	n, writes, log := e.rtt.count(func() {
		if w := serve(h, req("t1", "", body100)); w.Code != 201 {
			t.Fatalf("%d", w.Code)
		}
	})
	if n != 2 || writes != 2 {
		t.Errorf("unguarded request took %d round trips (%d socket writes), want 2: %q", n, writes, log)
	}
}
