package faults

import (
	"bufio"
	"context"
	"fmt"
	"github.com/jackc/pgx/v5/pgtype"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Scenario 5: slow bodies. More clients than the replica has pooled connections send their
// headers, then trickle their bodies a byte at a time. While they trickle, the replica must hold
// no pooled connection, no claim (no record, no advisory lock) for them, and a normal request
// with the same key as one trickler must run at once. When the tricklers finish, the one with the
// same request replays that response, the one with another body gets 422, the others run.
func TestSlowBodies(t *testing.T) {
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) { slowBodies(t, mode) })
	}
}

func slowBodies(t *testing.T, mode string) {
	w := newWorld(t, pgtest.NewDatabase(t))
	const pool = 4
	a := w.replica("A", func(c *replicaConfig) { c.MaxConns = pool })
	h := NewHistory()
	c := NewClient(h, 60*time.Second)
	defer c.Close()
	ctx := context.Background()
	n, every := pick(12, 100), pick(50*time.Millisecond, 200*time.Millisecond)
	shared := w.key("slow-shared")
	began := time.Now()
	// One request first, so that the pool has opened a connection.
	c.Send(ctx, a.target(), &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tB", Key: w.key("slow-warm"), Amount: 100})

	type trickler struct {
		req *Request
		a   Attempt
	}
	ts := make([]*trickler, n)
	for i := range ts {
		r := &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tB", Key: w.key(fmt.Sprintf("slow-%d", i)), Amount: int64(100 + i)}
		switch i {
		case 0:
			r.Key, r.Amount = shared, 100
		case 1:
			r.Key, r.Amount = shared, 200
		}
		ts[i] = &trickler{req: r, a: c.NewAttempt(a.target(), r)}
	}
	var wg sync.WaitGroup
	for _, tr := range ts {
		wg.Go(func() {
			tr.a = trickle(ctx, a.target(), tr.req, tr.a, every, h)
			h.Add(tr.a)
		})
	}
	// Every trickler's request has reached the replica (headers read, body pending).
	for _, tr := range ts {
		a.await("BODY "+tr.a.ID, 30*time.Second)
	}
	acquired, total := a.poolStat()
	var records, locks int
	// Records other than the warm-up's, advisory locks in this database.
	_, warmID := pgstore.Digest(store.ID{Scope: "tB", Key: w.key("slow-warm")})
	if err := w.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_records WHERE key_id <> $1),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`, pgtype.UUID{Bytes: warmID, Valid: true}).Scan(&records, &locks); err != nil {
		t.Fatal(err)
	}
	// A normal request with the shared key, and one with a key of its own, while they trickle.
	fastShared := c.Send(ctx, a.target(), &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tB", Key: shared, Amount: 100})
	fastOwn := c.Send(ctx, a.target(), &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tB", Key: w.key("slow-fast"), Amount: 100})
	trickling := map[string]bool{}
	for _, tr := range ts {
		trickling[tr.a.ID] = true
	}
	stillTrickling := h.Count(func(x *Attempt) bool { return trickling[x.ID] }) == 0
	wg.Wait()

	body, _ := ts[0].req.Body()
	w.verify("slowbody/"+mode, h, time.Since(began),
		AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindMismatch}, Settled: true}, ModelOptions{},
		fmt.Sprintf("%d clients trickling a %d-byte body, a byte every %v, to a replica with a pool of %d: while they trickled, pool connections acquired %d of %d, records %d, advisory locks %d",
			n, len(body), every, pool, acquired, total, records, locks),
		fmt.Sprintf("a normal request with a trickler's key answered %d %s in %v, one with its own key %d %s in %v",
			fastShared.Status, fastShared.Kind, (fastShared.Return-fastShared.Call).Round(time.Millisecond),
			fastOwn.Status, fastOwn.Kind, (fastOwn.Return-fastOwn.Call).Round(time.Millisecond)))
	if acquired != 0 || records != 0 || locks != 0 {
		t.Errorf("while bodies trickled: %d pool connections acquired, %d records, %d advisory locks; want none", acquired, records, locks)
	}
	if !stillTrickling {
		t.Fatal("the tricklers finished before the normal requests: the scenario measured nothing")
	}
	limit := time.Duration(len(body)) * every / 2
	for _, f := range []Attempt{fastShared, fastOwn} {
		if f.Kind != KindOK || f.Return-f.Call > limit {
			t.Errorf("a normal request while bodies trickled: %d %s in %v; want 201 within %v", f.Status, f.Kind, f.Return-f.Call, limit)
		}
	}
	if got := ts[0].a; got.Kind != KindReplay || got.ExecAttempt != fastShared.ID {
		t.Errorf("the trickler with the normal request's key and body: %d %s of %s, want a replay of %s", got.Status, got.Kind, got.ExecAttempt, fastShared.ID)
	}
	if got := ts[1].a; got.Kind != KindMismatch {
		t.Errorf("the trickler with the same key and another body: %d %s, want 422", got.Status, got.Kind)
	}
}

// trickle sends r as attempt a over a raw connection: the headers at once, then the body a byte
// every interval, then reads the answer.
func trickle(ctx context.Context, t Target, r *Request, a Attempt, every time.Duration, h *History) Attempt {
	u, _ := url.Parse(t.URL)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		a.Return = h.Now()
		Classify(&a, nil, nil, err)
		return a
	}
	defer conn.Close()
	body, _ := r.Body()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"Authorization: Bearer %s\r\nIdempotency-Key: %s\r\nX-Attempt: %s\r\nX-Body-Event: 1\r\nConnection: close\r\n\r\n",
		Path(r.Mode), u.Host, len(body), r.Tenant, r.Key, a.ID)
	_, err = io.WriteString(conn, head)
	for i := 0; err == nil && i < len(body); i++ {
		if i > 0 {
			time.Sleep(every) // the client's own pace, not a wait for a condition
		}
		_, err = conn.Write(body[i : i+1])
	}
	var resp *http.Response
	var got []byte
	if err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	}
	if err == nil {
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	a.Return = h.Now()
	Classify(&a, resp, got, err)
	return a
}
