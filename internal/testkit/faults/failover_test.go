package faults

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5/pgtype"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Scenario: PostgreSQL failover. A payment service runs a primary and a streaming standby
// (pg_basebackup, Debian's postgresql); its replicas reach the database through one address
// that operators move to the standby when they promote it (here a TCP proxy in the test; in
// production a virtual IP, a DNS name or a pooler). Under load, the standby falls behind (it is
// frozen for a moment, as a slow disk or a congested link would make it), the primary crashes
// (pg_ctl stop -m immediate), the standby is promoted (pg_ctl promote) and the address moves.
// Then every request a client saw acknowledged before the crash is checked on the new primary:
// is its record there, and does its retry replay or run the handler again?
//
//   - synchronous replication (synchronous_standby_names naming the standby, synchronous_commit
//     on or remote_apply): a commit is acknowledged only once the standby has it, so nothing
//     acknowledged is lost and no acknowledged request runs again; while the standby lags,
//     commits wait (the clients see 503 "outcome unknown" and retry).
//   - asynchronous replication: commits acknowledged while the standby lagged are gone after the
//     promotion; their retries run the handler again (atomic mode: a second payment that the
//     client was already told about; lease mode: a second provider call, which the provider's
//     deduplication on Lease.ProviderKey turns into one charge).
//
// The figures go to docs/runtime.md ("PostgreSQL failover").
func TestFailover(t *testing.T) {
	variants := []struct {
		name, commit string
		sync         bool
	}{
		{"synchronous", "on", true},
		{"asynchronous", "on", false},
	}
	if long() {
		variants = append(variants, struct {
			name, commit string
			sync         bool
		}{"synchronous-remote-apply", "remote_apply", true})
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // each on servers of its own; mostly waiting
			f := failover(t, v.sync, v.commit)
			t.Logf("faults: failover/%s (synchronous_commit=%s): %s", v.name, v.commit, f)
			if v.sync && (f.lost > 0 || f.ranAgain > 0) {
				t.Errorf("synchronous replication lost %d acknowledged records and ran %d acknowledged requests again", f.lost, f.ranAgain)
			}
			if f.ranAgain > f.lost {
				t.Errorf("%d acknowledged requests ran again, more than the %d records lost", f.ranAgain, f.lost)
			}
		})
	}
}

// failoverFigures is what one failover run measured.
type failoverFigures struct {
	acked    int // requests acknowledged (201 or replay) before the crash
	ackedLag int // of those, acknowledged while the standby lagged
	lost     int // acknowledged records missing (or not completed) on the promoted standby
	ranAgain int // acknowledged requests whose retry after the promotion ran the handler again
	dupCalls int // provider calls made twice for one key (lease mode), deduplicated by key
	outage   time.Duration
	answers  map[Kind]int
	phases   string
}

func (f failoverFigures) String() string {
	return fmt.Sprintf("%d requests acknowledged before the crash (%d while the standby lagged); after the promotion %d of their records missing, %d ran again (%d provider calls repeated under the same provider key); clients saw no answer for %v around the failover; answers %v; %s",
		f.acked, f.ackedLag, f.lost, f.ranAgain, f.dupCalls, f.outage.Round(10*time.Millisecond), f.answers, f.phases)
}

func failover(t *testing.T, synchronous bool, commit string) failoverFigures {
	primary := newCluster(t)
	dbURL := primary.database("faults_failover")
	link := newProxy(t, primary.addr())
	standby := newStandby(t, primary, link, "idemgen_standby")
	names := "''"
	if synchronous {
		names = "'idemgen_standby'"
	}
	primary.sql(t, "ALTER SYSTEM SET synchronous_standby_names = "+names)
	primary.sql(t, "ALTER SYSTEM SET synchronous_commit = "+commit)
	primary.sql(t, "SELECT pg_reload_conf()")
	eventually(t, "the standby to stream", 30*time.Second, func() bool {
		state := primary.sqlValue(t, "SELECT COALESCE(max(sync_state), '') FROM pg_stat_replication WHERE application_name = 'idemgen_standby'")
		return (synchronous && state == "sync") || (!synchronous && state == "async")
	})

	proxy := newProxy(t, primary.addr())
	u, _ := url.Parse(dbURL)
	u.Host = proxy.addr()
	w := newWorld(t, u.String())
	storeTimeout := pick(time.Second, 2*time.Second)
	cfg := func(rc *replicaConfig) { rc.StoreTimeout, rc.Lease, rc.MaxConns = storeTimeout, time.Second, 10 }
	reps := []*replica{w.replica("A", cfg), w.replica("B", cfg)}
	h := NewHistory()
	cl := NewClient(h, 30*time.Second)
	defer cl.Close()
	ctx := context.Background()

	f := failoverFigures{answers: map[Kind]int{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logicals []*Request
	for i := range pick(8, 16) {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				mode := []string{"atomic", "lease"}[n%2]
				r := &Request{Logical: cl.NextLogical(), Mode: mode, Tenant: "tF", Amount: int64(100 + i),
					Headers: map[string]string{"X-Delay": "10ms"}}
				r.Key = w.key(fmt.Sprintf("fo-%d", r.Logical))
				mu.Lock()
				logicals = append(logicals, r)
				mu.Unlock()
				cl.Run(ctx, r, Policy{Pick: func(k int) Target { return reps[(i+n+k)%2].target() },
					MaxBackoff: 200 * time.Millisecond, Deadline: 90 * time.Second})
			}
		})
	}
	served := func(from time.Duration, n int) func() bool {
		return func() bool {
			return h.Count(func(a *Attempt) bool { return a.Call >= from && (a.Kind == KindOK || a.Kind == KindReplay) }) >= n
		}
	}
	eventually(t, "the load to start", 30*time.Second, served(0, 40))

	// The standby falls behind: the link between the servers stops carrying WAL (congested,
	// or cut), and what the primary sends meanwhile waits in the link.
	tLag := h.Now()
	link.pause()
	time.Sleep(pick(500*time.Millisecond, 2*time.Second))
	// The primary crashes, and with it what the link held; the standby is promoted with what
	// it had received, and the address moves to it.
	tStop := h.Now()
	if out, err := primary.run("pg_ctl", "-D", primary.data(), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("crash the primary: %v\n%s", err, out)
	}
	tCrash := h.Now() // the primary is gone: every answer before this came from it
	link.cut()
	if out, err := standby.run("pg_ctl", "-D", standby.data(), "-w", "-t", "60", "promote"); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	tPromoted := h.Now()
	proxy.switchTo(standby.addr())
	tUp := h.Now()
	eventually(t, "the load to be served by the promoted standby", 60*time.Second, served(tUp, 40))
	tServed := h.Now()
	stop.Store(true)
	wg.Wait()
	f.phases = fmt.Sprintf("load %.1fs, link paused %.1fs, crash %.1fs, promotion %.1fs, served again after %.1fs",
		tLag.Seconds(), (tStop - tLag).Seconds(), (tCrash - tStop).Seconds(), (tPromoted - tCrash).Seconds(), (tServed - tUp).Seconds())

	// Which requests had a definitive success before the crash, with the execution it named.
	first := map[int]Attempt{}
	for _, a := range h.Attempts() {
		f.answers[a.Kind]++
		if (a.Kind == KindOK || a.Kind == KindReplay) && a.Return < tCrash {
			if _, seen := first[a.Logical]; !seen {
				first[a.Logical] = a
			}
		}
	}
	f.outage = quietAround(h.Attempts(), tCrash)
	byLogical := map[int]*Request{}
	for _, r := range logicals {
		byLogical[r.Logical] = r
	}
	for lg, a := range first {
		f.acked++
		if a.Return >= tLag {
			f.ackedLag++
		}
		r := byLogical[lg]
		if !w.hasCompleted(r.Tenant, r.Key) {
			f.lost++
		}
	}
	// Every acknowledged request once more: a replay of the same execution, or a new one.
	var ranAgain atomic.Int64
	var confirm sync.WaitGroup
	sem := make(chan struct{}, 8)
	for lg, a := range first {
		r := byLogical[lg]
		confirm.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			again := cl.Run(ctx, r, Policy{Pick: func(k int) Target { return reps[k%2].target() }, MaxBackoff: 200 * time.Millisecond, Deadline: 30 * time.Second})
			if again.Kind == KindOK || (again.Kind == KindReplay && again.ExecAttempt != a.ExecAttempt) {
				ranAgain.Add(1)
			}
		})
	}
	confirm.Wait()
	f.ranAgain = int(ranAgain.Load())
	calls := map[string]int{}
	for _, c := range w.provider.Calls() {
		calls[c.Key]++
	}
	for _, n := range calls {
		if n > 1 {
			f.dupCalls++
		}
	}
	return f
}

// quietAround is the longest stretch around instant at in which no attempt got a success or a
// replay: how long clients saw the service down.
func quietAround(attempts []Attempt, at time.Duration) time.Duration {
	before, after := time.Duration(0), time.Duration(1<<62)
	for _, a := range attempts {
		if a.Kind != KindOK && a.Kind != KindReplay {
			continue
		}
		if a.Return <= at && a.Return > before {
			before = a.Return
		}
		if a.Return > at && a.Return < after {
			after = a.Return
		}
	}
	if after == time.Duration(1<<62) {
		return 0
	}
	return after - before
}

// hasCompleted reports whether the key's completed record is in the database the world's pool
// reaches now (a lease-mode claim whose completion was lost is there as a running record).
func (w *world) hasCompleted(tenant, key string) bool {
	w.t.Helper()
	scopeID, keyID := pgstore.Digest(store.ID{Scope: tenant, Key: key})
	var n int
	for range 50 {
		err := w.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records WHERE scope_id = $1 AND key_id = $2 AND response_status <> 0", scopeID, pgtype.UUID{Bytes: keyID, Valid: true}).Scan(&n)
		if err == nil {
			return n > 0
		}
		time.Sleep(100 * time.Millisecond) // a connection to the crashed primary, replaced on the next try
	}
	w.t.Fatal("the promoted standby does not answer")
	return false
}

// newStandby makes a streaming standby of primary: pg_basebackup with -R (standby.signal and
// primary_conninfo), named app so that synchronous_standby_names can name it, on a port of its
// own, streaming through link.
func newStandby(t *testing.T, primary *cluster, link *proxy, app string) *cluster {
	t.Helper()
	c := emptyCluster(t, primary.bindir)
	if out, err := c.run("pg_basebackup", "-D", c.data(), "-h", "127.0.0.1", "-p", fmt.Sprint(primary.port),
		"-U", "postgres", "-X", "stream", "-R", "-c", "fast"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	// The standby streams through link, the network between the two servers, which the
	// scenario can congest.
	_, port, _ := net.SplitHostPort(link.addr())
	// wal_retrieve_retry_interval: a promotion that finds the link gone waits this long first
	// (5 s by default).
	conninfo := fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%s user=postgres application_name=%s'\nwal_retrieve_retry_interval = '100ms'\n", port, app)
	// A later line wins: this one names the standby (what -R wrote may not carry
	// application_name).
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conninfo)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("primary_conninfo: %v", err)
	}
	c.start()
	return c
}

// emptyCluster is a cluster folder of its own, on a free port, with nothing in it yet.
func emptyCluster(t *testing.T, bindir string) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "idemgen-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bindir: bindir, dir: dir}
	c.own()
	t.Cleanup(func() { c.remove() })
	c.port = freeTCPPort(t)
	return c
}

// sql runs one statement on the cluster's postgres database.
func (c *cluster) sql(t *testing.T, stmt string) {
	t.Helper()
	if out, err := c.run("psql", "-X", "-q", "-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", stmt); err != nil {
		t.Fatalf("%s: %v\n%s", stmt, err, out)
	}
}

// sqlValue runs one query on the cluster's postgres database and returns its one value.
func (c *cluster) sqlValue(t *testing.T, query string) string {
	t.Helper()
	out, err := c.run("psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", "postgres", "-d", "postgres", "-c", query)
	if err != nil {
		t.Fatalf("%s: %v\n%s", query, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (c *cluster) addr() string { return fmt.Sprintf("127.0.0.1:%d", c.port) }

// proxy forwards TCP connections to the current primary: the one address the service's replicas
// know. switchTo moves it, closing the connections it carried (as a moved virtual IP does).
type proxy struct {
	t      *testing.T
	l      net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	// paused, while set, holds what the proxy reads (it is closed by unpause): the link is
	// congested.
	paused chan struct{}
}

// pause stops the proxy from passing anything on: reads are held, and the senders' writes back
// up behind them.
func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// cut drops the connections the proxy carries, and what it held of them, and lets new ones
// through.
func (p *proxy) cut() {
	p.closeAll()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

func (p *proxy) waitUnpaused() {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, l: l, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		l.Close()
		p.closeAll()
	})
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				p.waitUnpaused()
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

func (p *proxy) switchTo(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.closeAll()
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
