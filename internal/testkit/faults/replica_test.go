package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// A replica is this test binary run again as a child process (TestMain sees envReplica): it
// serves NewService on a loopback port against the scenario's database until its stdin closes
// (the parent ended) or it is killed. It prints "LISTEN <addr>" once ready and one line per
// event ("IN_HANDLER a12").

const envReplica = "IDEMGEN_FAULTS_REPLICA"

// replicaConfig is what the parent passes to a replica, as JSON in envReplica.
type replicaConfig struct {
	Name     string
	Database string
	Provider string
	MaxConns int32
	// StoreTimeout is Config.StoreTimeout; zero keeps the default.
	StoreTimeout time.Duration
	Retention    time.Duration
	Lease        time.Duration
	// CheckInterval sets PostgreSQL's client_connection_check_interval on the pool's sessions.
	CheckInterval string
	// Sweep runs a pgstore.Sweeper every Sweep; zero runs none.
	Sweep time.Duration
	// Session are further run-time parameters of the pool's sessions.
	Session map[string]string
}

// replicaMain is the child's main; it returns the exit code.
func replicaMain(raw string) int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replica config:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pcfg, err := pgxpool.ParseConfig(cfg.Database)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pcfg.MaxConns = cfg.MaxConns
	for k, v := range cfg.Session {
		pcfg.ConnConfig.RuntimeParams[k] = v
	}
	if cfg.CheckInterval != "" {
		pcfg.ConnConfig.RuntimeParams["client_connection_check_interval"] = cfg.CheckInterval
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	var outMu sync.Mutex
	emit := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(os.Stdout, line)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The store sets client_connection_check_interval in its transactions (1 s by default):
	// the replica's CheckInterval is the store's too, and without one the store sets none, so
	// that the kill scenarios compare a backend with the check and one without.
	opts := pgstore.Options{ClientCheckInterval: -1}
	if d, err := time.ParseDuration(cfg.CheckInterval); err == nil && d > 0 {
		opts.ClientCheckInterval = d
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, opts), Scope: Tenant,
		Logger: logger, StoreTimeout: cfg.StoreTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.Sweep > 0 {
		go (&pgstore.Sweeper{Pool: pool, Interval: cfg.Sweep, Logger: logger}).Run(ctx)
	}
	h := NewService(rt, pool, ServiceConfig{Retention: cfg.Retention, Lease: cfg.Lease, Provider: cfg.Provider, Events: emit})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	srv := &http.Server{Handler: h, ErrorLog: nil}
	go srv.Serve(l)
	emit("LISTEN " + l.Addr().String())
	io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin or goes away
	return 0
}

// replica is the parent's handle on a child replica.
type replica struct {
	t      testing.TB
	name   string
	url    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer

	mu     sync.Mutex
	events []string
	notify chan struct{} // closed and replaced on each event
	exited chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startReplica starts a replica and waits until it listens.
func startReplica(t testing.TB, cfg replicaConfig) *replica {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), envReplica+"="+string(raw))
	r := &replica{t: t, name: cfg.Name, cmd: c, stderr: &lockedBuffer{}, notify: make(chan struct{}), exited: make(chan struct{})}
	c.Stderr = r.stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = c.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.events = append(r.events, sc.Text())
			close(r.notify)
			r.notify = make(chan struct{})
			r.mu.Unlock()
		}
		c.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			if s := r.stderr.String(); s != "" {
				t.Logf("replica %s stderr (handler failures, then the last lines):\n%s\n%s", r.name, grep(s, "handler failed"), tail(s, 20))
			}
		}
	})
	line := r.await("LISTEN ", 30*time.Second)
	r.url = "http://" + strings.TrimPrefix(line, "LISTEN ")
	return r
}

// target is the replica as a client's target.
func (r *replica) target() Target { return Target{Name: r.name, URL: r.url} }

// await waits for an event line starting with prefix and returns it.
func (r *replica) await(prefix string, timeout time.Duration) string {
	r.t.Helper()
	return r.awaitUnless(prefix, timeout, nil)
}

// awaitHandler waits until the replica's handler holds the request whose answer done will
// carry; the test fails with that answer if it comes first.
func (r *replica) awaitHandler(done chan Attempt) {
	r.t.Helper()
	r.awaitUnless("IN_HANDLER ", 30*time.Second, done)
}

func (r *replica) awaitUnless(prefix string, timeout time.Duration, done chan Attempt) string {
	r.t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		r.mu.Lock()
		for ; seen < len(r.events); seen++ {
			if strings.HasPrefix(r.events[seen], prefix) {
				e := r.events[seen]
				r.mu.Unlock()
				return e
			}
		}
		ch := r.notify
		r.mu.Unlock()
		select {
		case <-ch:
		case <-r.exited:
			r.t.Fatalf("replica %s exited while the test waited for %q; stderr:\n%s", r.name, prefix, tail(r.stderr.String(), 40))
		case a := <-done:
			r.t.Fatalf("replica %s: the request was answered (%d %s: %s) before %q", r.name, a.Status, a.Kind, a.Detail, prefix)
		case <-deadline:
			r.t.Fatalf("replica %s: no %q within %v", r.name, prefix, timeout)
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatal(err)
	}
	<-r.exited
}

// poolStat reads the replica's pool figures.
func (r *replica) poolStat() (acquired, total int32) {
	r.t.Helper()
	resp, err := http.Get(r.url + "/_pool")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s map[string]int32
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		r.t.Fatal(err)
	}
	return s["acquired"], s["total"]
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = append([]string{fmt.Sprintf("... %d lines before", len(parts)-lines)}, parts[len(parts)-lines:]...)
	}
	return strings.Join(parts, "\n")
}
