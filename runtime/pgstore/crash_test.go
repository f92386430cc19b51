package pgstore_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The crash tests re-run this test binary as a child process (TestCrashChild with
// IDEMGEN_CRASH_CHILD set) that serves one request whose handler sleeps, and kill it with
// SIGKILL in the middle of the handler: no deferred code runs, nothing is rolled back by the
// client; only the server's own recovery and the record's lease remain.

const envCrashChild = "IDEMGEN_CRASH_CHILD"

// TestCrashChild is the child: it serves one slow request against the parent's database.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(envCrashChild)
	if mode == "" {
		t.Skip("runs only as the child of the crash tests")
	}
	var tweak func(*setup)
	if name, ok := strings.CutPrefix(mode, "atomic/"); ok {
		for _, s := range strategies {
			if s.name == name {
				tweak = withStrategy(s.strategy)
			}
		}
	}
	e := newEnvAt(t, os.Getenv("IDEMGEN_CRASH_URL"), tweak)
	w := serve(e.crashHandler(mode), req("t1", key1, body100, "X-Delay", "60s", "X-Signal", "1"))
	t.Fatalf("the child was not killed: %d", w.Code)
}

// crashHandler is the handler both processes use: atomic ("atomic/<strategy>"), or lease with
// the provider's charges kept in the database.
func (e *env) crashHandler(mode string) http.Handler {
	switch mode {
	case "lease":
		return e.leaseHandler(leaseOp(), &provider{db: e.pool})
	case "lease-completion":
		return e.slowCompletionHandler(leaseOp(), &provider{db: e.pool})
	case "statement":
		// The handler writes its row, then runs a statement that lasts a minute: the process is
		// killed while PostgreSQL executes it.
		return e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
			if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
				return runtime.Response{}, err
			}
			if r.Header.Get("X-Signal") != "" {
				os.Stdout.WriteString("IN_HANDLER\n")
			}
			if _, err := db.Exec(ctx, "SELECT pg_sleep(60)"); err != nil {
				return runtime.Response{}, err
			}
			return created(`{"slept":true}`), nil
		})
	}
	return e.atomicHandler(payOp())
}

// crashChild starts the child, waits until it is inside the handler, and kills it.
func crashChild(t *testing.T, mode, url string) { crashChildAfter(t, mode, url, nil) }

// crashChildAfter is crashChild that, once the child is inside its handler, also waits (up to
// 10 s) for ready to hold before the kill.
func crashChildAfter(t *testing.T, mode, url string, ready func() bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashChild+"="+mode, "IDEMGEN_CRASH_URL="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inHandler := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "IN_HANDLER") {
				inHandler <- true
				return
			}
		}
		inHandler <- false
	}()
	var ok bool
	select {
	case ok = <-inHandler:
	case <-time.After(30 * time.Second):
	}
	for deadline := time.Now().Add(10 * time.Second); ok && ready != nil && !ready() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !ok {
		t.Fatal("the child never reached its handler")
	}
}

// Atomic mode: the killed handler's transaction (claim and business write) dies with its
// connection, so the retry runs at once and the payment is made once.
func TestCrashAtomic(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, withStrategy(s.strategy))
			crashChild(t, "atomic/"+s.name, e.url)
			h := e.crashHandler("atomic")
			start := time.Now()
			var w *responseSummary
			conflicts := 0
			// The server notices the dead connection within milliseconds; until then the claim's
			// lock still answers 409, which a client retries.
			for time.Since(start) < 5*time.Second {
				w = summarize(t, serve(h, req("t1", key1, body100)))
				if w.status != 409 {
					break
				}
				conflicts++
				time.Sleep(20 * time.Millisecond)
			}
			if w.status != 201 || w.replayed {
				t.Fatalf("retry after the crash: %+v", w)
			}
			t.Logf("atomic retry ran after %v (%d conflicts)", time.Since(start).Round(time.Millisecond), conflicts)
			if time.Since(start) > time.Second {
				t.Errorf("the retry waited %v; the key must be free at once", time.Since(start))
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments = %d, want 1", n)
			}
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatal("the retry's response must replay")
			}
		})
	}
}

// Lease mode: the killed handler's claim stays until its lease (500ms) ends: retries get 409
// with Retry-After, then one takes over; the provider, keyed by the derived key, charges once.
func TestCrashLease(t *testing.T) {
	e := newEnv(t, nil)
	crashChild(t, "lease", e.url)
	killed := time.Now()
	h := e.crashHandler("lease")
	w := serve(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight || w.Header().Get("Retry-After") == "" {
		t.Fatalf("retry during the lease: %d %v %s", w.Code, w.Header(), w.Body)
	}
	var s *responseSummary
	for time.Since(killed) < 5*time.Second {
		s = summarize(t, serve(h, req("t1", key1, body100)))
		if s.status != 409 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.status != 201 || s.replayed {
		t.Fatalf("takeover: %+v", s)
	}
	if e.obs.get(runtime.OutcomeTakeover) != 1 {
		t.Fatalf("takeovers = %d", e.obs.get(runtime.OutcomeTakeover))
	}
	p := &provider{db: e.pool}
	if e.payments("t1") != 1 || p.count() != 1 {
		t.Fatalf("payments %d, provider charges %d; want 1 and 1", e.payments("t1"), p.count())
	}
}

// A process killed while PostgreSQL runs one of its handler's statements (docs/design.md section 4: a
// crash rolls everything back, so a retry simply runs again).
// The backend notices the closed connection only when it next reads from it, so without
// client_connection_check_interval the key stays claimed (409) until the orphaned statement
// ends, here a minute. The store turns the check on for its transactions (PostgreSQL 14 and
// later): the key must be free within a few seconds.
func TestCrashDuringAStatement(t *testing.T) {
	e := newEnv(t, nil)
	crashChild(t, "statement", e.url)
	killed := time.Now()
	h := e.crashHandler("atomic")
	var s *responseSummary
	for time.Since(killed) < 15*time.Second {
		s = summarize(t, serve(h, req("t1", key1, body100)))
		if s.status != 409 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	freed := time.Since(killed)
	if s.status != 201 || s.replayed {
		t.Fatalf("retry %v after the crash: %+v", freed.Round(time.Millisecond), s)
	}
	t.Logf("the key was free %v after the kill", freed.Round(time.Millisecond))
	if freed > 5*time.Second {
		t.Errorf("the key stayed claimed %v after the kill, want a few seconds", freed)
	}
	if n := e.payments("t1"); n != 1 {
		t.Fatalf("payments = %d, want 1 (the killed request's row rolled back)", n)
	}
}
