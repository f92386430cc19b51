package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// The tenant of these tests looks like what scopes often are: a credential.
const secretTenant = "sk_live_tenant_4f9a8b7c6d5e"

// Every log line about a request, the runtime's and the handler's own (through LogHandler),
// carries the tenant and key digests, never the tenant or the key (docs/runtime.md, "Logs").
func TestEveryRequestLogLineCarriesDigests(t *testing.T) {
	var e *memEnv
	var f *faultStore
	e, f = newFaultEnv(t, func(c *Config) {
		c.Logger = slog.New(LogHandler(c.Logger.Handler()))
	})
	tenantHash, keyHash := LogDigests(secretTenant, key1)
	if len(tenantHash) != 12 || len(keyHash) != 12 || tenantHash == keyHash {
		t.Fatalf("digests %q %q", tenantHash, keyHash)
	}
	if th, _ := LogDigests("other", key1); th == tenantHash {
		t.Fatal("tenant digest ignores the tenant")
	}
	// A handler logging with its context, through the same logger.
	logging := AtomicHandler(e.rt, payOp(), BindAtomic(decodePay, func(ctx context.Context, db *memstore.DB, r *payReq) (Response, error) {
		e.rt.log.InfoContext(ctx, "charging the card", "amount", r.Amount)
		if got := LogAttrs(ctx); len(got) != 4 {
			t.Errorf("LogAttrs in the handler: %v", got)
		}
		return Response{}, errors.New("card declined by a bug")
	}))
	serveReq(logging, req(secretTenant, key1, body100))

	// The lease machine's own lines: a takeover, and a release that fails.
	f.release = func() error { return errors.New("connection reset") }
	lease := e.leaseHandler(leaseOp())
	go serveReq(lease, req(secretTenant, key1+"-lease", body100, "X-Hold", "g"))
	e.gate("g").wait(t)
	e.clock.advance(time.Minute)
	serveReq(lease, req(secretTenant, key1+"-lease", body100, "X-Fail", "error"))
	e.gate("g").open()

	// A store failure.
	f.beginAtomic = func(context.Context) error { return errRefused }
	serveReq(e.atomicHandler(payOp()), req(secretTenant, key1, body100))

	logs := strings.TrimSpace(e.logs.String())
	for _, want := range []string{"charging the card", "idempotent handler failed", "lease taken over", "release lease failed", "idempotency store failed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no line %q in\n%s", want, logs)
		}
	}
	_, leaseHash := LogDigests(secretTenant, key1+"-lease")
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, secretTenant) || strings.Contains(line, key1) {
			t.Errorf("a raw tenant or key in %s", line)
		}
		if !strings.Contains(line, "tenant_hash="+tenantHash) {
			t.Errorf("no tenant_hash in %s", line)
		}
		if !strings.Contains(line, "key_hash="+keyHash) && !strings.Contains(line, "key_hash="+leaseHash) {
			t.Errorf("no key_hash in %s", line)
		}
		if strings.Count(line, "key_hash=") != 1 {
			t.Errorf("key_hash repeated in %s", line)
		}
	}
}

type execObserver struct {
	NopObserver
	mu   sync.Mutex
	seen []string
}

func (o *execObserver) Execution(op string, mode Mode, out Outcome, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		out = "negative"
	}
	o.seen = append(o.seen, op+"/"+mode.String()+"/"+string(out))
}

// An Observer that is also an ExecutionObserver gets the first owner's execution time; replays
// and conflicts are not executions.
func TestExecutionObserver(t *testing.T) {
	obs := &execObserver{}
	e := newMemEnv(t, func(c *Config) { c.Observer = obs })
	h := e.atomicHandler(payOp())
	serveReq(h, req("t1", key1, body100))
	serveReq(h, req("t1", key1, body100))                              // replay
	serveReq(h, req("t1", key1, `{"amount":5}`))                       // mismatch
	serveReq(h, req("t1", key1+"-x", body100, "X-Fail", "500"))        // released
	serveReq(e.leaseHandler(leaseOp()), req("t1", key1+"-l", body100)) // lease executed
	want := "createPayment/atomic/executed createPayment/atomic/released createProviderCharge/lease/executed"
	if got := strings.Join(obs.seen, " "); got != want {
		t.Errorf("executions %q, want %q", got, want)
	}
}
