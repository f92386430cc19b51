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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// The support page and its JSON over the PostgreSQL store, with records made by real requests
// through the runtime: a tenant-wide atomic operation whose response carries markup and script
// (what an attacker who controls a stored body or header would try), and a per-operation lease
// operation that can be held running.

const (
	tenant  = "acme-payments"
	payKey  = "pay-2026-05-01-0000000001"
	capKey  = "cap-2026-05-01-0000000001"
	hostile = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`
)

func payOp() *runtime.Operation {
	return &runtime.Operation{
		ID: "createPayment", Method: "POST", Path: "/v1/payments",
		Key:           runtime.KeyRule{Header: "Idempotency-Key", Required: true, Characters: runtime.KeyOpaque},
		Retention:     time.Hour,
		MediaTypes:    []string{"application/json"},
		ReplayHeaders: []string{"X-Note"},
	}
}

func captureOp() *runtime.Operation {
	return &runtime.Operation{
		ID: "captureCharge", Method: "POST", Path: "/v1/captures", Mode: runtime.ModeLease,
		Scope:      runtime.ScopeOperation,
		Key:        runtime.KeyRule{Header: "Idempotency-Key", Required: true},
		Retention:  time.Hour,
		Lease:      time.Minute,
		MediaTypes: []string{"application/json"},
	}
}

// refundOp folds a connected-account header into the scope (Operation.ScopeHeaders).
func refundOp() *runtime.Operation {
	return &runtime.Operation{
		ID: "createRefund", Method: "POST", Path: "/v1/refunds",
		Key:          runtime.KeyRule{Header: "Idempotency-Key", Required: true},
		Retention:    time.Hour,
		MediaTypes:   []string{"application/json"},
		ScopeHeaders: []string{"Stripe-Account"},
	}
}

type body struct{}

func decode(in *gen.Input) (body, error) {
	in.RawBody()
	return body{}, nil
}

// service is a runtime on a fresh database with both operations mounted, and the admin
// handler mounted under /admin/ as the package documentation shows.
type service struct {
	srv     *httptest.Server
	st      *pgstore.Store
	release chan struct{} // closing it lets a held captureCharge finish
	held    chan struct{} // closed when captureCharge is held
}

func newService(t *testing.T) *service {
	t.Helper()
	pool := pgtest.NewPool(t, 10)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s := &service{st: pgstore.New(pool, pgstore.Options{}), release: make(chan struct{}), held: make(chan struct{})}
	rt, err := runtime.New(runtime.Config{
		Store:  s.st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Scope: func(r *http.Request) (string, error) {
			if v := r.Header.Get("X-Tenant"); v != "" {
				return v, nil
			}
			return "", errors.New("no tenant")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", runtime.AtomicHandler(rt, payOp(), runtime.BindAtomic(decode,
		func(ctx context.Context, db pgstore.DBTX, _ *body) (runtime.Response, error) {
			h := http.Header{}
			h.Set("Content-Type", "text/html")
			h.Set("Location", `/v1/payments/42"><script>document.title="pwned"</script>`)
			h.Set("X-Note", hostile)
			return runtime.Response{Status: http.StatusCreated, Header: h, Body: []byte(hostile)}, nil
		})))
	mux.Handle("POST /v1/captures", runtime.LeaseHandler(rt, captureOp(), runtime.BindLease(decode,
		func(ctx context.Context, l *runtime.Lease, _ *body) (runtime.CompleteFunc[pgstore.DBTX], error) {
			close(s.held)
			<-s.release
			return func(context.Context, pgstore.DBTX) (runtime.Response, error) {
				return runtime.Response{Status: http.StatusOK, Body: []byte(`{"captured":true}`)}, nil
			}, nil
		})))
	mux.Handle("POST /v1/refunds", runtime.AtomicHandler(rt, refundOp(), runtime.BindAtomic(decode,
		func(ctx context.Context, db pgstore.DBTX, _ *body) (runtime.Response, error) {
			return runtime.Response{Status: http.StatusCreated, Body: []byte(`{"refunded":true}`)}, nil
		})))
	h, err := admin.New(s.st, admin.Options{Operations: []*runtime.Operation{payOp(), captureOp(), refundOp()}})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.srv.Close()
	})
	return s
}

func (s *service) post(path, key string, header ...string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(`{"amount":100}`))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("Idempotency-Key", key)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// fill makes one completed payment and one capture held running; it returns when both are
// stored.
func (s *service) fill(t *testing.T) {
	t.Helper()
	if r, err := s.post("/v1/payments", payKey); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("payment: %v %v", r, err)
	}
	go s.post("/v1/captures", capKey) // held until the test ends
	select {
	case <-s.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the capture never started")
	}
}

func TestLookup(t *testing.T) {
	s := newService(t)
	s.fill(t)
	ctx := context.Background()
	ops := []*runtime.Operation{payOp(), captureOp()}

	recs, err := admin.Lookup(ctx, s.st, tenant, `"`+payKey+`"`, admin.LookupOptions{Operations: ops})
	if err != nil || len(recs) != 1 {
		t.Fatalf("lookup of a quoted key: %+v %v", recs, err)
	}
	r := recs[0]
	th, kh := runtime.LogDigests(tenant, payKey)
	if r.State != "completed" || r.Operation != "createPayment" || r.Status != 201 || r.Key != payKey || r.PerOperation ||
		!strings.HasPrefix(r.Location, "/v1/payments/42") || r.Body != nil || r.BodyBytes != int64(len(hostile)) ||
		r.CompletedAt == nil || r.ExpiresAt.Sub(*r.CompletedAt) < 59*time.Minute || r.LeaseUntil != nil ||
		r.TenantHash != th || r.KeyHash != kh || len(r.Fingerprint) != 64 || r.FingerprintVersion == 0 || r.Headers["X-Note"][0] != hostile {
		t.Errorf("completed record: %+v", r)
	}
	withBody, err := admin.Lookup(ctx, s.st, tenant, payKey, admin.LookupOptions{Body: true})
	if err != nil || len(withBody) != 1 || string(withBody[0].Body) != hostile || withBody[0].BodyText != hostile {
		t.Errorf("with body: %+v %v", withBody, err)
	}

	// The capture's key is per operation: found through the operation table or by naming the
	// operation, not by a bare lookup.
	if recs, err := admin.Lookup(ctx, s.st, tenant, capKey, admin.LookupOptions{}); err != nil || len(recs) != 0 {
		t.Errorf("a bare lookup found a per-operation key: %+v %v", recs, err)
	}
	recs, err = admin.Lookup(ctx, s.st, tenant, capKey, admin.LookupOptions{Operations: ops})
	if err != nil || len(recs) != 1 {
		t.Fatalf("per-operation lookup: %+v %v", recs, err)
	}
	c := recs[0]
	if c.State != "running" || !c.PerOperation || c.Key != capKey || c.Operation != "captureCharge" || c.LeaseUntil == nil ||
		!c.LeaseRunning || c.LeaseUntil.Sub(c.ReadAt) < 50*time.Second || c.CompletedAt != nil || c.Status != 0 || c.FencingToken != 1 {
		t.Errorf("running record: %+v", c)
	}
	one, found, err := admin.LookupOperation(ctx, s.st, tenant, "captureCharge", capKey, false)
	if err != nil || !found || one.Operation != "captureCharge" {
		t.Errorf("LookupOperation: %+v %v %v", one, found, err)
	}
	if _, found, err := admin.LookupOperation(ctx, s.st, tenant, "captureCharge", payKey, false); err != nil || found {
		t.Errorf("LookupOperation of another operation's key: %v %v", found, err)
	}
	if recs, err := admin.Lookup(ctx, s.st, "someone-else", payKey, admin.LookupOptions{Operations: ops}); err != nil || len(recs) != 0 {
		t.Errorf("another tenant: %+v %v", recs, err)
	}
	for _, bad := range []string{"", "  ", `"unterminated`, `"two";a=1`} {
		if _, err := admin.Lookup(ctx, s.st, tenant, bad, admin.LookupOptions{}); !errors.Is(err, admin.ErrLookupInvalid) {
			t.Errorf("key %q: %v, want ErrLookupInvalid", bad, err)
		}
	}
	if _, err := admin.Lookup(ctx, memstore.New(time.Now), tenant, payKey, admin.LookupOptions{}); !errors.Is(err, admin.ErrNoInspector) {
		t.Errorf("a store without Inspector: %v", err)
	}
	if _, err := admin.New(memstore.New(time.Now), admin.Options{}); !errors.Is(err, admin.ErrNoInspector) {
		t.Errorf("admin.New on a store without Inspector: %v", err)
	}

	// A refund under a connected account: its scope is the tenant and the header's value.
	const refundKey = "refund-2026-05-01-000000001"
	if r, err := s.post("/v1/refunds", refundKey, "Stripe-Account", "acct_123"); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("refund: %v %v", r, err)
	}
	ops = append(ops, refundOp())
	if recs, err := admin.Lookup(ctx, s.st, tenant, refundKey, admin.LookupOptions{Operations: ops}); err != nil || len(recs) != 0 {
		t.Errorf("found without the account: %+v %v", recs, err)
	}
	recs, err = admin.Lookup(ctx, s.st, tenant, refundKey, admin.LookupOptions{Operations: ops,
		ScopeHeaders: http.Header{"Stripe-Account": {"acct_123"}}})
	if err != nil || len(recs) != 1 {
		t.Fatalf("with the account: %+v %v", recs, err)
	}
	th, _ = runtime.LogDigests(tenant, refundKey)
	_, kh = runtime.LogDigests(refundOp().RequestScope(tenant, http.Header{"Stripe-Account": {"acct_123"}}), refundKey)
	if r := recs[0]; r.Tenant != tenant || r.ScopeHeaders["Stripe-Account"] != "acct_123" || r.Operation != "createRefund" ||
		r.TenantHash != th || r.KeyHash != kh {
		t.Errorf("refund record: %+v", r)
	}

	st, err := admin.Stats(ctx, s.st)
	if err != nil || st.Running != 1 || st.Completed != 2 || len(st.Operations) != 3 {
		t.Errorf("stats: %+v %v", st, err)
	}
	// An opaque key (key.characters: opaque) may hold spaces and commas: support staff find it
	// as they paste it, through the operation table or by a bare lookup.
	const opaqueKey = "two words, one key"
	if r, err := s.post("/v1/payments", opaqueKey); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("payment under an opaque key: %v %v", r, err)
	}
	for _, opts := range []admin.LookupOptions{{}, {Operations: ops}} {
		recs, err := admin.Lookup(ctx, s.st, tenant, "  "+opaqueKey+" ", opts)
		if err != nil || len(recs) != 1 || recs[0].Key != opaqueKey || recs[0].PerOperation || recs[0].Operation != "createPayment" {
			t.Errorf("opaque key (operations %d): %+v %v", len(opts.Operations), recs, err)
		}
	}
}

func TestAdminJSON(t *testing.T) {
	s := newService(t)
	s.fill(t)
	c := s.srv.Client()
	base := s.srv.URL + "/admin"

	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := get("/records?" + url.Values{"tenant": {tenant}, "key": {payKey}}.Encode())
	var out struct {
		Tenant, Key string
		Records     []admin.RecordInfo
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Records) != 1 || out.Records[0].Body != nil {
		t.Fatalf("GET /records: %d %s %v", resp.StatusCode, b, err)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json", "Content-Security-Policy": admin.ContentSecurityPolicy,
		"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	// POST with a JSON search, body included; the operation narrows to per-operation keys.
	post := func(q string) (*http.Response, []byte) {
		t.Helper()
		resp, err := c.Post(base+"/records", "application/json", strings.NewReader(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b = post(`{"tenant":"` + tenant + `","key":"` + payKey + `","body":true}`)
	out.Records = nil
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Records) != 1 || string(out.Records[0].Body) != hostile {
		t.Fatalf("POST /records with body: %d %s %v", resp.StatusCode, b, err)
	}
	resp, b = post(`{"tenant":"` + tenant + `","key":"` + capKey + `","operation":"captureCharge"}`)
	out.Records = nil
	if err := json.Unmarshal(b, &out); err != nil || len(out.Records) != 1 || out.Records[0].State != "running" {
		t.Fatalf("POST /records by operation: %d %s %v", resp.StatusCode, b, err)
	}
	resp, b = post(`{"tenant":"` + tenant + `","key":"no-such-key-000000001"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"records": []`) {
		t.Errorf("no record: %d %s", resp.StatusCode, b)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/records?tenant=" + tenant, "", 400},
		{"POST", "/records", `{"tenant":"a","key":"k","extra":1}`, 400},
		{"GET", "/records?tenant=a&key=%22unterminated", "", 400},
		{"PUT", "/records", "", 405},
		{"DELETE", "/", "", 405},
		{"GET", "/nothing", "", 404},
		{"GET", "/style.css", "", 200},
		{"GET", "/stats", "", 200},
		{"GET", "/", "", 200},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: %d %s, want %d with a CSP", tc.method, tc.path, resp.StatusCode, b, tc.status)
		}
		if tc.path == "/stats" && !strings.Contains(string(b), `"running": 1`) {
			t.Errorf("stats: %s", b)
		}
	}
}

// The page escapes everything stored: no tag from a stored body, header or Location reaches
// the HTML as markup (the browser test checks the same in Chromium).
func TestAdminPageEscapes(t *testing.T) {
	s := newService(t)
	s.fill(t)
	form := url.Values{"tenant": {tenant}, "key": {payKey}, "body": {"1"}}
	resp, err := s.srv.Client().PostForm(s.srv.URL+"/admin/", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") || strings.Contains(page, "onerror=\"") {
		t.Errorf("stored markup reached the page as markup:\n%s", page)
	}
	if !strings.Contains(page, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;") || !strings.Contains(page, "createPayment") {
		t.Errorf("the stored body is not shown escaped:\n%s", page)
	}
	if r, err := s.post("/v1/refunds", "refund-2026-05-01-000000002", "Stripe-Account", "acct_9"); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("refund: %v %v", r, err)
	}
	form = url.Values{"tenant": {tenant}, "key": {"refund-2026-05-01-000000002"}, "h:Stripe-Account": {"acct_9"}}
	resp, err = s.srv.Client().PostForm(s.srv.URL+"/admin/", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if page := string(b); !strings.Contains(page, `name="h:Stripe-Account" value="acct_9"`) || !strings.Contains(page, "createRefund") {
		t.Errorf("the refund under its account is not on the page:\n%s", page)
	}
	if r, err := s.srv.Client().Get(s.srv.URL + "/admin"); err != nil || r.StatusCode != 200 {
		t.Errorf("GET /admin (no slash) does not reach the page: %v %v", r, err)
	}
}

// TestNoRecordStatuses: the page that finds no record names the statuses that leave none as
// runtime/defaults has them: each code replay.statuses' default excludes, and the statuses of
// the problems answered before the key is read.
func TestNoRecordStatuses(t *testing.T) {
	s := newService(t)
	resp, err := s.srv.Client().PostForm(s.srv.URL+"/admin/", url.Values{"tenant": {tenant}, "key": {"never-used-key-0000000001"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, none, _ := strings.Cut(string(b), `id="none"`)
	none, _, _ = strings.Cut(none, "</p>")
	var want []string
	for _, r := range defaults.Statuses() {
		if r.Exclude {
			want = append(want, strconv.Itoa(r.Code))
		}
	}
	for _, name := range []string{defaults.ProblemUnauthenticated, defaults.ProblemBodyTooLarge, defaults.ProblemMediaTypeUnsupported} {
		want = append(want, strconv.Itoa(defaults.ProblemStatus(name)))
	}
	for _, code := range want {
		if !strings.Contains(none, code) {
			t.Errorf("the page without a record does not name %s: %q", code, none)
		}
	}
}

// A key of an operation declared scope: path (the Agentic Commerce Protocol's: per endpoint
// path) is stored under the path's values: the lookup finds the record of the path it is given,
// and none without a path.
func TestLookupScopePath(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
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
	op := func() *runtime.Operation {
		return &runtime.Operation{ID: "updateSession", Method: "POST", Path: "/v1/sessions/{id}", Scope: runtime.ScopePath,
			Key: runtime.KeyRule{Header: "Idempotency-Key", Required: true, MinLength: 1, Characters: runtime.KeyOpaque}, MediaTypes: []string{"application/json"}}
	}
	srv := httptest.NewServer(runtime.AtomicHandler(rt, op(), runtime.BindAtomic(decode,
		func(ctx context.Context, db pgstore.DBTX, _ *body) (runtime.Response, error) {
			return runtime.Response{Status: http.StatusOK, Body: []byte(`{}`)}, nil
		})))
	t.Cleanup(srv.Close)
	for _, session := range []string{"s1", "s2"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/sessions/"+session, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("Idempotency-Key", "one key, two sessions")
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", session, resp, err)
		}
		resp.Body.Close()
	}
	ops := []*runtime.Operation{op()}
	for _, path := range []string{"/v1/sessions/s1", "/v1/sessions/s2"} {
		recs, err := admin.Lookup(ctx, st, tenant, "one key, two sessions", admin.LookupOptions{Operations: ops, Path: path})
		if err != nil || len(recs) != 1 || !recs[0].PerOperation || recs[0].Operation != "updateSession" || recs[0].State != "completed" {
			t.Errorf("lookup at %s: %+v %v", path, recs, err)
		}
	}
	if recs, err := admin.Lookup(ctx, st, tenant, "one key, two sessions", admin.LookupOptions{Operations: ops}); err != nil || len(recs) != 0 {
		t.Errorf("a lookup without the path found %+v %v", recs, err)
	}
}

// A key remembered by its tombstone after its record's retention is found by the lookup and on
// the support page, as a tombstone: its status class, when it completed, until when it is
// remembered, and what a retry gets, whether or not the sweeper deleted the expired row.
func TestLookupTombstone(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	if r, err := s.post("/v1/payments", payKey); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("payment: %v %v", r, err)
	}
	if _, err := s.st.Pool().Exec(ctx, `UPDATE idempotency_records SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	for _, swept := range []bool{false, true} {
		if swept {
			if _, err := (&pgstore.Sweeper{Pool: s.st.Pool()}).SweepOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := admin.Lookup(ctx, s.st, tenant, payKey, admin.LookupOptions{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("swept %v: %d records, %v", swept, len(recs), err)
		}
		r := recs[0]
		if r.State != "tombstone" || r.StatusClass != 2 || r.ForgetAt == nil || r.CompletedAt == nil || !r.ForgetAt.After(r.ReadAt.Add(29*24*time.Hour)) || r.Status != 0 {
			t.Errorf("swept %v: %+v, want a tombstone of a 2xx remembered for 30 days", swept, r)
		}
	}
	resp, err := s.srv.Client().PostForm(s.srv.URL+"/admin/", url.Values{"tenant": {tenant}, "key": {payKey}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`data-state="tombstone"`, "410 result-expired", "2xx (the response is gone)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the support page does not show %q:\n%s", want, page)
		}
	}
}
