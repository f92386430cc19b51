package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// A lease-mode charge whose process stops answering after its provider call (its handler never
// returns, and its lease ends) is uncertain: the page lists it with its provider key, /uncertain
// answers it as JSON, and a lookup of its key shows the state and the calls.
func TestUncertainRecords(t *testing.T) {
	pool := pgtest.NewPool(t, 10)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	rt, err := runtime.New(runtime.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Scope: func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	op := &runtime.Operation{ID: "chargeCard", Method: "POST", Path: "/v1/charges", Mode: runtime.ModeLease,
		Key: runtime.KeyRule{Header: "Idempotency-Key", Required: true}, Retention: time.Hour,
		Lease: 300 * time.Millisecond, MediaTypes: []string{"application/json"}}
	called := make(chan string, 1)
	stuck := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", runtime.LeaseHandler(rt, op, runtime.BindLease(decode,
		func(ctx context.Context, l *runtime.Lease, _ *body) (runtime.CompleteFunc[pgstore.DBTX], error) {
			pk, err := l.ProviderCall(ctx, runtime.Call{Label: "<b>charge</b>", Amount: 1999, Currency: "eur"})
			if err != nil {
				return nil, err
			}
			called <- pk
			<-stuck // the process stops here (a SIGKILL, in production)
			return nil, errors.New("never")
		})))
	h, err := admin.New(st, admin.Options{Operations: []*runtime.Operation{op}})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stuck) }) // first: the stuck handler returns, then the server closes

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, page := get("/admin/"); code != 200 || !strings.Contains(page, `id="uncertain-none"`) {
		t.Fatalf("page before: %d", code)
	}
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/charges", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("Idempotency-Key", "charge-2026-11-02-000001")
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	pk := <-called
	time.Sleep(400 * time.Millisecond) // the lease ends

	code, js := get("/admin/uncertain?since=1h&limit=10")
	var got struct {
		Records []admin.RecordInfo `json:"records"`
	}
	if code != 200 || json.Unmarshal([]byte(js), &got) != nil || len(got.Records) != 1 {
		t.Fatalf("/uncertain: %d %s", code, js)
	}
	r := got.Records[0]
	if r.State != "uncertain" || r.Uncertain != "lease_ended" || r.Operation != "chargeCard" || r.RecordRef == "" || r.Key != "" ||
		len(r.ProviderCalls) != 1 || r.ProviderCalls[0].ProviderKey != pk || r.ProviderCalls[0].Currency != "EUR" || *r.ProviderCalls[0].Amount != 1999 {
		t.Errorf("uncertain record %+v", r)
	}
	for _, bad := range []string{"?since=yesterday", "?limit=0", "?limit=5000"} {
		if code, _ := get("/admin/uncertain" + bad); code != 400 {
			t.Errorf("/uncertain%s: %d, want 400", bad, code)
		}
	}
	if code, _ := get("/admin/uncertain?since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))); code != 200 {
		t.Errorf("since an RFC 3339 time: %d", code)
	}

	_, page := get("/admin/")
	if !strings.Contains(page, pk) || !strings.Contains(page, "lease_ended") || !strings.Contains(page, "1999 EUR") ||
		strings.Contains(page, "<b>charge</b>") || !strings.Contains(page, "&lt;b&gt;charge&lt;/b&gt;") {
		t.Errorf("the page does not list the uncertain record (escaped):\n%s", page)
	}

	resp, err := srv.Client().PostForm(srv.URL+"/admin/records", url.Values{"tenant": {tenant}, "key": {"charge-2026-11-02-000001"}})
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Records []admin.RecordInfo `json:"records"`
	}
	err = json.NewDecoder(resp.Body).Decode(&found)
	resp.Body.Close()
	if err != nil || len(found.Records) != 1 || found.Records[0].State != "uncertain" || len(found.Records[0].ProviderCalls) != 1 || found.Records[0].KeyHash == "" {
		t.Errorf("lookup of the uncertain key: %+v, %v", found.Records, err)
	}
}
