package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// petstore starts the example, exactly as main wires it, on a fresh database.
func petstore(t *testing.T, opts options) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t, 10)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	h, _, err := newServer(pgstore.New(pool, pgstore.Options{}), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, pool
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, c *http.Client, url, key, body string) (*answer, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("api_key", "test-client")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &answer{resp.StatusCode, resp.Header, b}, nil
}

func mustPost(t *testing.T, c *http.Client, url, key, body string) *answer {
	t.Helper()
	a, err := post(t, c, url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// addPet adds a pet and returns its id.
func addPet(t *testing.T, srv *httptest.Server, key string) int64 {
	t.Helper()
	a := mustPost(t, srv.Client(), srv.URL+"/pet", key, `{"name": "doggie", "photoUrls": [], "status": "available"}`)
	if a.status != http.StatusCreated {
		t.Fatalf("addPet: %d %s", a.status, a.body)
	}
	var pet struct{ ID int64 }
	if err := json.Unmarshal(a.body, &pet); err != nil || pet.ID == 0 {
		t.Fatalf("addPet body %s: %v", a.body, err)
	}
	return pet.ID
}

func countOrders(t *testing.T, pool *pgxpool.Pool) (n int, quantities []int32) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT quantity FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var q int32
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		quantities = append(quantities, q)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return len(quantities), quantities
}

// lossyTransport delivers the request and receives the server's answer, then reports a network
// error instead, as when a connection drops just before the response reaches the client. It
// keeps what it dropped so the test can compare the retry's answer with it.
type lossyTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	lost *answer
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.lost = &answer{resp.StatusCode, resp.Header, b}
	l.mu.Unlock()
	return nil, errors.New("connection reset by peer (simulated)")
}

func TestLostResponseThenRetry(t *testing.T) {
	srv, pool := petstore(t, options{})
	petID := addPet(t, srv, "pet-key-lost-0000000001")
	order := `{"petId": ` + itoa(petID) + `, "quantity": 2, "status": "placed"}`
	const key = "order-key-lost-000000001"

	lossy := &lossyTransport{base: srv.Client().Transport}
	if _, err := post(t, &http.Client{Transport: lossy}, srv.URL+"/store/order", key, order); err == nil {
		t.Fatal("the lossy transport delivered a response")
	}
	if lossy.lost == nil || lossy.lost.status != http.StatusCreated {
		t.Fatalf("the lost answer was %+v, want a 201", lossy.lost)
	}

	retry := mustPost(t, srv.Client(), srv.URL+"/store/order", key, order)
	if retry.status != http.StatusCreated {
		t.Fatalf("retry: status %d %s, want 201", retry.status, retry.body)
	}
	if got := retry.header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("retry: Idempotent-Replayed = %q, want true", got)
	}
	if !bytes.Equal(retry.body, lossy.lost.body) {
		t.Errorf("retry body %s\nis not the lost body %s", retry.body, lossy.lost.body)
	}
	if retry.header.Get("Location") == "" || retry.header.Get("Location") != lossy.lost.header.Get("Location") {
		t.Errorf("retry Location %q, lost %q", retry.header.Get("Location"), lossy.lost.header.Get("Location"))
	}
	if n, _ := countOrders(t, pool); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}

func TestParallelDuplicatesWhileSlow(t *testing.T) {
	srv, pool := petstore(t, options{orderDelay: 700 * time.Millisecond})
	petID := addPet(t, srv, "pet-key-parallel-000001")
	order := `{"petId": ` + itoa(petID) + `, "quantity": 1}`
	const key = "order-key-parallel-00001"

	answers := make([]*answer, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = post(t, srv.Client(), srv.URL+"/store/order", key, order)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(answers, func(i, j int) bool { return answers[i].status < answers[j].status })
	if answers[0].status != http.StatusCreated || answers[1].status != http.StatusConflict {
		t.Fatalf("statuses %d and %d, want one 201 and one 409\n%s\n%s", answers[0].status, answers[1].status, answers[0].body, answers[1].body)
	}
	if answers[0].header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the 201 says it is a replay")
	}
	conflict := answers[1]
	if ct := conflict.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("409 Content-Type %q, want application/problem+json", ct)
	}
	if conflict.header.Get("Retry-After") == "" {
		t.Errorf("409 without Retry-After")
	}
	if !strings.Contains(string(conflict.body), "in-flight") {
		t.Errorf("409 body %s does not name the in-flight problem", conflict.body)
	}
	if n, _ := countOrders(t, pool); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}

func TestChangedQuantityIsAMismatch(t *testing.T) {
	srv, pool := petstore(t, options{})
	petID := addPet(t, srv, "pet-key-mismatch-000001")
	const key = "order-key-mismatch-00001"
	first := mustPost(t, srv.Client(), srv.URL+"/store/order", key, `{"petId": `+itoa(petID)+`, "quantity": 1}`)
	if first.status != http.StatusCreated {
		t.Fatalf("first order: %d %s", first.status, first.body)
	}
	changed := mustPost(t, srv.Client(), srv.URL+"/store/order", key, `{"petId": `+itoa(petID)+`, "quantity": 3}`)
	if changed.status != http.StatusUnprocessableEntity {
		t.Fatalf("changed quantity: %d %s, want 422", changed.status, changed.body)
	}
	if !strings.Contains(string(changed.body), "payload-mismatch") {
		t.Errorf("422 body %s does not name the payload-mismatch problem", changed.body)
	}
	n, q := countOrders(t, pool)
	if n != 1 || q[0] != 1 {
		t.Errorf("orders %v, want exactly the first (quantity 1)", q)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// The api_key header is the idempotency scope: without it a marked operation is refused before
// any key lookup, and two clients using the same key do not see each other's records.
func TestAPIKeyIsTheScope(t *testing.T) {
	srv, pool := petstore(t, options{})
	petID := addPet(t, srv, "pet-key-scope-000000001")
	order := `{"petId": ` + itoa(petID) + `, "quantity": 1}`
	const key = "order-key-scope-00000001"

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/store/order", strings.NewReader(order))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "unauthenticated") {
		t.Errorf("without api_key: %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}

	for _, client := range []string{"client-a", "client-b"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/store/order", strings.NewReader(order))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("api_key", client)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("%s: %d replayed=%q, want a new 201", client, resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
		}
	}
	if n, _ := countOrders(t, pool); n != 2 {
		t.Errorf("%d orders, want 2 (one per client)", n)
	}
}
