package querykey

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/client"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// loseFirstResponse delivers every request, and loses the answer to the first: the server ran
// it, the client saw a broken connection.
type loseFirstResponse struct {
	base http.RoundTripper
	lost atomic.Bool
}

func (l *loseFirstResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// TestQueryKeyClient: runtime/client's Transport with WithQueryKey("requestId") against the
// generated service on PostgreSQL. The answer to the first attempt is lost after the hub was
// created; the retry carries the same requestId in the query, gets the stored answer
// (Idempotent-Replayed), and the hub exists once.
func TestQueryKeyClient(t *testing.T) {
	pool := pgtest.NewPool(t, 12)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: bearer})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(withTenant(pool, generated(t, rt)))
	t.Cleanup(srv.Close)
	var keys []string
	tr := client.New(&loseFirstResponse{base: srv.Client().Transport}, client.WithQueryKey("requestId"),
		client.WithOnRetry(func(r client.Retry) { keys = append(keys, r.Key) }))
	hc := &http.Client{Transport: tr}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/projects/p1/hubs?hubId=hub-1", strings.NewReader(`{"description":"first"}`))
	req.Header.Set("Authorization", "Bearer t1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !client.Replayed(resp) || len(keys) != 1 || tr.KeyOf(resp) != keys[0] {
		t.Fatalf("%d replayed=%v %s; retried with keys %q, KeyOf %q", resp.StatusCode, client.Replayed(resp), body, keys, tr.KeyOf(resp))
	}
	effects, _ := http.NewRequest(http.MethodGet, srv.URL+"/_effects", nil)
	effects.Header.Set("Authorization", "Bearer t1")
	resp, err = srv.Client().Do(effects)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n struct{ Hubs int }
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || n.Hubs != 1 {
		t.Fatalf("hubs created: %d (%v), want 1", n.Hubs, err)
	}
}
