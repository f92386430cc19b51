package pgstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// What PostgreSQL writes to its own log: no raw key or scope (docs/design.md section 4: logs never print
// raw keys; the DETAIL of the record INSERT's unique_violation after the read→lock race would
// print both) and no ERROR line per 409 (the lock-or-stop statement of ClaimWithStatement).
// This test runs storms, duplicates, mismatches, replays, the read→lock race and a scope of
// 2.7 KB on a server of its own, then reads that server's log.

// serverLog reads the private cluster's log from an offset.
type serverLog struct {
	path string
	at   int64
}

func (l *serverLog) mark(t *testing.T) {
	t.Helper()
	st, err := os.Stat(l.path)
	if err != nil {
		t.Fatal(err)
	}
	l.at = st.Size()
}

// since returns what the server logged after the last mark, once the log has been quiet for a
// moment (the server writes its log lines asynchronously to our requests' answers).
func (l *serverLog) since(t *testing.T) string {
	t.Helper()
	var prev int64 = -1
	for range 50 {
		st, err := os.Stat(l.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == prev {
			break
		}
		prev = st.Size()
		time.Sleep(40 * time.Millisecond)
	}
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(l.at, int64(len(b))):])
}

// errorLines returns the ERROR lines of log.
func errorLines(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "ERROR:") {
			out = append(out, line)
		}
	}
	return out
}

func TestServerLogHoldsNoKeysAndNo409Errors(t *testing.T) {
	c := newCluster(t)
	log := &serverLog{path: filepath.Join(c.dir, "server.log")}
	// Markers that must never reach the log: the tenant, the keys, and an amount that is in
	// every request and response body.
	const (
		scopeMark = "tenant-SCOPEMARK"
		keyMark   = "KEYMARK"
		bodyMark  = "7373737373"
	)
	body := `{"amount":` + bodyMark + `}`
	// A scope of ~2.7 KB, random so that PostgreSQL cannot compress it below
	// the B-tree's row limit (2704 bytes).
	random := make([]byte, 2040)
	_, _ = rand.Read(random)
	longScope := scopeMark + "-" + base64.RawURLEncoding.EncodeToString(random)
	n := 0
	newKey := func() string { n++; return fmt.Sprintf("key-%s-%06d", keyMark, n) }

	type variant struct {
		name  string
		lease bool
		tweak func(*setup)
		// quiet: duplicates that arrive after the claim is held must not write ERROR lines.
		quiet bool
	}
	variants := []variant{
		{"WithStatement", false, withStrategy(pgstore.ClaimWithStatement{}), true},
		{"WithStatement/LockAtRead", false, withLockAtRead, true},
		{"ReadFirst", false, withStrategy(pgstore.ClaimReadFirst{}), true},
		{"Pipelined", false, withStrategy(pgstore.ClaimPipelined{}), false},
		// Without advisory locks a duplicate can only learn of a running claim by waiting on its
		// row until lock_timeout, an ERROR by nature (docs/runtime.md).
		{"portable", false, func(s *setup) { s.store.NoAdvisoryLocks = true }, false},
		{"lease", true, nil, true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			e := newEnvAt(t, c.url(), v.tweak)
			op := payOp()
			if v.lease {
				op = leaseOp()
				op.Lease = 5 * time.Second
			}
			h := e.atomicHandler(op)
			if v.lease {
				h = e.leaseHandler(op, &provider{})
			}
			tenant := scopeMark + "-" + v.name

			// New, replays, a mismatch, and the same for a scope of 2.7 KB.
			for _, scope := range []string{tenant, longScope} {
				k := newKey()
				if w := serve(h, req(scope, k, body)); w.Code != 201 {
					t.Fatalf("new key, scope of %d bytes: %d %s", len(scope), w.Code, w.Body)
				}
				for range 2 {
					if w := serve(h, req(scope, k, body)); w.Header().Get(runtime.HeaderReplayed) != "true" {
						t.Fatalf("replay, scope of %d bytes: %d %s", len(scope), w.Code, w.Body)
					}
				}
				if w := serve(h, req(scope, k, `{"amount":5}`)); w.Code != 422 {
					t.Fatalf("mismatch, scope of %d bytes: %d %s", len(scope), w.Code, w.Body)
				}
			}

			// Duplicates while the first request holds the key (its claim is out: the handler
			// wrote its row, or in lease mode the claim committed).
			log.mark(t)
			k := newKey()
			done := make(chan int)
			go func() { done <- serve(h, req(tenant, k, body, "X-Hold", k)).Code }()
			g := e.gate(k)
			g.wait(t)
			for i := range 20 {
				if w := serve(h, req(tenant, k, body)); w.Code != 409 {
					t.Fatalf("duplicate %d: %d %s", i, w.Code, w.Body)
				}
			}
			g.open()
			if code := <-done; code != 201 {
				t.Fatalf("first: %d", code)
			}
			if errs := errorLines(log.since(t)); v.quiet && len(errs) > 0 {
				t.Errorf("20 duplicates of a held key wrote %d ERROR lines to the server log, want 0:\n%s",
					len(errs), strings.Join(errs[:min(4, len(errs))], "\n"))
			} else {
				t.Logf("20 duplicates of a held key: %d ERROR lines", len(errs))
			}

			// A storm: 40 copies released together on a fresh key, the handler slow.
			log.mark(t)
			k = newKey()
			var wg sync.WaitGroup
			start := make(chan struct{})
			codes := make(chan int, 40)
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					codes <- serve(h, req(tenant, k, body, "X-Delay", "100ms")).Code
				}()
			}
			close(start)
			wg.Wait()
			close(codes)
			statuses := map[int]int{}
			for code := range codes {
				statuses[code]++
			}
			if statuses[201] < 1 || statuses[500]+statuses[503] > 0 {
				t.Fatalf("storm: %v", statuses)
			}
			t.Logf("storm of 40: %v; %d ERROR lines in the server log", statuses, len(errorLines(log.since(t))))
		})
	}

	// The Middleware with LockAtRead: new keys, replays, mismatches, duplicates of a held key,
	// and a handler that fails, panics or answers 503: no ERROR line, and no WARNING (a release
	// of a lock the session does not hold would write one).
	t.Run("Middleware/LockAtRead", func(t *testing.T) {
		e := newEnvAt(t, c.url(), withLockAtRead)
		var entered atomic.Int64
		h := lockedMiddleware(t, e, &entered)
		tenant := scopeMark + "-middleware"
		log.mark(t)
		for _, scope := range []string{tenant, longScope} {
			k := newKey()
			if w := serve(h, req(scope, k, body)); w.Code != 201 {
				t.Fatalf("new key: %d %s", w.Code, w.Body)
			}
			for range 2 {
				if w := serve(h, req(scope, k, body)); w.Header().Get(runtime.HeaderReplayed) != "true" {
					t.Fatalf("replay: %d %s", w.Code, w.Body)
				}
			}
			if w := serve(h, req(scope, k, `{"amount":5}`)); w.Code != 422 {
				t.Fatalf("mismatch: %d %s", w.Code, w.Body)
			}
		}
		k := newKey()
		done := make(chan int)
		go func() { done <- serve(h, req(tenant, k, body, "X-Hold", k)).Code }()
		e.gate(k).wait(t)
		for i := range 20 {
			if w := serve(h, req(tenant, k, body)); w.Code != 409 {
				t.Fatalf("duplicate %d: %d %s", i, w.Code, w.Body)
			}
		}
		e.gate(k).open()
		if code := <-done; code != 201 {
			t.Fatalf("first: %d", code)
		}
		for _, mode := range []string{"panic-first", "unavailable-first", "panic", "unavailable"} {
			if w := serve(h, req(tenant, newKey(), body, "X-Mode", mode)); w.Code < 500 {
				t.Fatalf("%s: %d", mode, w.Code)
			}
		}
		var bad []string
		for _, line := range strings.Split(log.since(t), "\n") {
			if strings.Contains(line, "ERROR:") || strings.Contains(line, "WARNING:") {
				bad = append(bad, line)
			}
		}
		if len(bad) > 0 {
			t.Errorf("the Middleware wrote %d ERROR or WARNING lines to the server log, want 0:\n%s",
				len(bad), strings.Join(bad[:min(4, len(bad))], "\n"))
		}
	})

	// The read→lock race of ClaimWithStatement: the first request reads no record and works
	// before its first statement (the claim waits for it: long Delay); a second request runs and
	// completes the key meanwhile; the first request's claim then wins the free lock, and its
	// record INSERT meets the second's row. It must be answered from that record.
	t.Run("ReadLockRace", func(t *testing.T) {
		e := newEnvAt(t, c.url(), withDelay(time.Minute))
		// The second request runs on another replica: on the first's own Store it would be
		// answered 409 at once (the Store's claims in progress).
		other := newEnvAt(t, c.url(), withDelay(time.Minute))
		read, release := make(chan struct{}), make(chan struct{})
		handler := func(e *env) http.Handler {
			return e.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
				if r.Header.Get("X-Slow") != "" {
					close(read)
					<-release
				}
				if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
					return runtime.Response{}, err
				}
				return runtime.Response{Status: http.StatusCreated, Body: []byte(body)}, nil
			})
		}
		h := handler(e)
		tenant := scopeMark + "-race"
		k := newKey()
		first := make(chan *responseSummary)
		go func() { first <- summarize(t, serve(h, req(tenant, k, body, "X-Slow", "1"))) }()
		<-read
		if w := serve(handler(other), req(tenant, k, body)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
			close(release)
			t.Fatalf("second: %d %s", w.Code, w.Body)
		}
		log.mark(t)
		close(release)
		if s := <-first; s.status != 201 || !s.replayed {
			t.Fatalf("first, after losing the race: %+v, want the second's response replayed", s)
		}
		if n := e.payments(tenant); n != 1 {
			t.Fatalf("payments %d, want 1", n)
		}
		t.Logf("the race: %d ERROR lines", len(errorLines(log.since(t))))
	})

	all, err := os.ReadFile(log.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, mark := range []string{scopeMark, keyMark, bodyMark} {
		if i := bytes.Index(all, []byte(mark)); i >= 0 {
			lineStart := bytes.LastIndexByte(all[:i], '\n') + 1
			lineEnd := i + bytes.IndexByte(all[i:], '\n')
			if lineEnd < i {
				lineEnd = len(all)
			}
			line := string(all[lineStart:lineEnd])
			t.Errorf("the server log holds %q: %.300s", mark, line)
		}
	}
}
