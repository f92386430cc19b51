package pgstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// cluster is a throwaway PostgreSQL server of this test's own, so it can be stopped and started
// without disturbing the shared test server (scripts/with-postgres.sh exports the binaries'
// folder as IDEMGEN_PG_BINDIR).
type cluster struct {
	t      *testing.T
	bindir string
	dir    string
	port   int
	asUser []string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	bindir := os.Getenv("IDEMGEN_PG_BINDIR")
	if bindir == "" {
		if os.Getenv("IDEMGEN_REQUIRE_DB") == "1" || os.Getenv("CI") == "true" {
			t.Fatal("IDEMGEN_PG_BINDIR is not set: run with scripts/with-postgres.sh")
		}
		t.Skip("IDEMGEN_PG_BINDIR is not set: run with scripts/with-postgres.sh")
	}
	dir, err := os.MkdirTemp("", "idemgen-storedown-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bindir: bindir, dir: dir}
	if os.Getuid() == 0 { // initdb refuses root: the cluster belongs to postgres
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	t.Cleanup(func() {
		_, _ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.start()
	return c
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) run(name string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, c.asUser...), filepath.Join(c.bindir, name))
	argv = append(argv, args...)
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

func (c *cluster) start() {
	c.t.Helper()
	out, err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on", c.port, c.dir), "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("start: %v\n%s\n%s", err, out, log)
	}
}

func (c *cluster) stop() {
	c.t.Helper()
	if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		c.t.Fatalf("stop: %v\n%s", err, out)
	}
}

func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// docs/design.md section 1, last row: the store cannot be reached → 503 store-unavailable with
// Retry-After, and the handler never runs (fail closed), in both modes. Stopping the server
// mid-handler loses nothing: the retry after the restart runs once, and earlier records still
// replay.
func TestStoreStoppedMidTest(t *testing.T) {
	c := newCluster(t)
	e := newEnvAt(t, c.url(), func(s *setup) { s.cfg.StoreTimeout = 2 * time.Second })
	h := e.atomicHandler(payOp())

	first := serve(h, req("t1", key1, body100))
	if first.Code != 201 {
		t.Fatalf("before the stop: %d %s", first.Code, first.Body)
	}

	// A request in its handler when the server stops: its commit fails, the client gets 503.
	midKey := "k-mid-handler-0000001"
	mid := make(chan *responseSummary)
	go func() { mid <- summarize(t, serve(h, req("t1", midKey, body100, "X-Hold", "mid"))) }()
	g := e.gate("mid")
	g.wait(t)
	c.stop()
	g.open()
	if s := <-mid; s.status != 503 || s.problem != runtime.ProblemStoreUnavailable || s.retryAfter == "" {
		t.Fatalf("mid-handler stop: %+v", s)
	}

	// While the server is down: 503 with Retry-After, and the handler never runs.
	var ran atomic.Int64
	probe := runtime.AtomicHandler(e.rt, payOp(), runtime.BindAtomic(decodePay, func(context.Context, pgstore.DBTX, *payReq) (runtime.Response, error) {
		ran.Add(1)
		return runtime.Response{Status: 201}, nil
	}))
	leaseProbe := runtime.LeaseHandler(e.rt, leaseOp(), runtime.BindLease(decodePay, func(context.Context, *runtime.Lease, *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		ran.Add(1)
		return nil, nil
	}))
	for _, key := range []string{"k-while-down-000001", key1} {
		for name, h := range map[string]*responseSummary{
			"atomic": summarize(t, serve(probe, req("t1", key, body100))),
			"lease":  summarize(t, serve(leaseProbe, req("t1", key, body100))),
		} {
			if h.status != 503 || h.problem != runtime.ProblemStoreUnavailable || h.retryAfter != "1" {
				t.Fatalf("%s, down, key %s: %+v", name, key, h)
			}
		}
	}
	if ran.Load() != 0 {
		t.Fatal("a handler ran without the store")
	}
	if e.obs.get(runtime.OutcomeStoreError) < 5 {
		t.Errorf("outcomes %v, want every 503 counted as store_error", e.obs)
	}

	c.start()
	// Clients retry 503s; pooled connections to the old server fail once each, then reconnect.
	retry := func(key string) *responseSummary {
		var s *responseSummary
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			s = summarize(t, serve(h, req("t1", key, body100)))
			if s.status != 503 {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
		return s
	}
	if s := retry(key1); s.status != 201 || !s.replayed {
		t.Fatalf("the earlier record must still replay: %+v", s)
	}
	if s := retry(midKey); s.status != 201 || s.replayed {
		t.Fatalf("the interrupted request must run on retry: %+v", s)
	}
	if n := e.payments("t1"); n != 2 {
		t.Fatalf("payments = %d, want 2", n)
	}
}
