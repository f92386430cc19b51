package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The suite runs in short mode unless IDEMGEN_FAULTS=long (make faults): CI runs the short mode,
// a few seconds per scenario; the long mode repeats each scenario with more load, longer faults
// and the issue's own timings.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(envReplica); cfg != "" {
		os.Exit(replicaMain(cfg))
	}
	os.Exit(m.Run())
}

// long reports whether the suite runs in long mode.
func long() bool { return os.Getenv("IDEMGEN_FAULTS") == "long" && !testing.Short() }

// pick returns short in short mode, long in long mode.
func pick[T any](short, long_ T) T {
	if long() {
		return long_
	}
	return short
}

// world is one scenario's database, provider and inspection pool.
type world struct {
	t        *testing.T
	url      string
	pool     *pgxpool.Pool
	provider *Provider
	provURL  string
	// suffix makes the scenario's keys unique.
	suffix string
}

func newWorld(t *testing.T, url string) *world {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, Schema); err != nil {
		t.Fatal(err)
	}
	p := NewProvider()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	var b [8]byte
	rand.Read(b[:])
	return &world{t: t, url: url, pool: pool, provider: p, provURL: srv.URL, suffix: hex.EncodeToString(b[:])}
}

// replica starts a replica of the scenario's service; tweak adjusts its configuration.
func (w *world) replica(name string, tweak func(*replicaConfig)) *replica {
	w.t.Helper()
	cfg := replicaConfig{Name: name, Database: w.url, Provider: w.provURL, MaxConns: 20,
		Retention: time.Hour, Lease: 5 * time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	return startReplica(w.t, cfg)
}

// key returns a key unique to this run.
func (w *world) key(name string) string { return name + "-" + w.suffix }

// effects reads the ground truth: every business row, every provider call.
func (w *world) effects() Effects {
	w.t.Helper()
	var eff Effects
	for _, table := range []string{"payments", "charges"} {
		rows, err := w.pool.Query(context.Background(), `SELECT tenant || '/' || idem_key, id, attempt, amount FROM `+table+` ORDER BY id`)
		if err != nil {
			w.t.Fatal(err)
		}
		for rows.Next() {
			var r Row
			if err := rows.Scan(&r.Key, &r.ID, &r.Attempt, &r.Amount); err != nil {
				w.t.Fatal(err)
			}
			eff.Rows = append(eff.Rows, r)
		}
		if err := rows.Err(); err != nil {
			w.t.Fatal(err)
		}
	}
	eff.Calls = w.provider.Calls()
	return eff
}

// verify audits the run's history against the effects, checks it for linearizability, prints
// the figures and the verdict, and fails the test on any problem.
func (w *world) verify(name string, h *History, elapsed time.Duration, audit AuditOptions, model ModelOptions, extra ...string) Figures {
	t := w.t
	t.Helper()
	attempts := h.Attempts()
	eff := w.effects()
	f := Summarize(name, attempts, eff, elapsed)
	f.Extra = extra
	// A legal history checks in milliseconds; an illegal one may make porcupine search long.
	v, err := Check(name, attempts, model, pick(10*time.Second, 2*time.Minute))
	if err != nil {
		t.Error(err)
	}
	t.Logf("faults: %s\n  %s", f, v)
	if v.Result != porcupine.Ok {
		t.Errorf("%s: the client-visible history is not linearizable against the contract (%s); see %s", name, v.Result, v.Visualization)
	}
	for _, p := range Audit(attempts, eff, audit) {
		t.Errorf("%s: %s", name, p)
	}
	if t.Failed() {
		t.Logf("history of %s:\n%s", name, describe(attempts, 400))
		if dir, err := os.MkdirTemp("", "idemgen-faults-history-"); err == nil {
			path := filepath.Join(dir, sanitize(name)+".txt")
			if os.WriteFile(path, []byte(describe(attempts, len(attempts))), 0o644) == nil {
				t.Logf("the whole history of %s: %s", name, path)
			}
		}
	}
	return f
}

// describe lists up to limit attempts, one per line: call and return (seconds from the start),
// attempt, logical request, key, body, replica, status, kind, execution, detail.
func describe(attempts []Attempt, limit int) string {
	var b strings.Builder
	for i, a := range attempts {
		if i == limit {
			fmt.Fprintf(&b, "... %d more\n", len(attempts)-i)
			break
		}
		fmt.Fprintf(&b, "  %7.3fs %7.3fs %-6s L%-4d %s %s@%s → %d %s", a.Call.Seconds(), a.Return.Seconds(), a.ID, a.Logical, a.Key, a.Body, a.Replica, a.Status, a.Kind)
		if a.ExecAttempt != "" {
			fmt.Fprintf(&b, " exec %d by %s", a.ExecID, a.ExecAttempt)
		}
		if a.Detail != "" {
			fmt.Fprintf(&b, " (%s)", a.Detail)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// eventually waits until cond holds, polling, or fails the test after timeout.
func eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}
