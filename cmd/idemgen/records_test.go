package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// `idemgen records` against a real PostgreSQL: a support person with a tenant and a key finds
// the record, and the stats count what the store holds.
func TestRecordsCommands(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	claim := func(key, op string) store.Claim {
		return store.Claim{ID: store.ID{Scope: "acme", Key: key}, Operation: op, Retention: time.Hour, Lease: time.Minute,
			Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))}}
	}
	c := claim("k-cli-0000000000000001", "createPayment")
	r, err := st.Reserve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, withHour(c), r.Token, store.Response{Status: 201, Header: []byte(`{"Location":["/v1/payments/9"]}`), Body: []byte(`{"id":9}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, claim("captureCharge k-cli-0000000000000001", "captureCharge")); err != nil {
		t.Fatal(err)
	}
	// A record under a scope header (Stripe-Account), as the runtime stores it.
	refundOp := &runtime.Operation{ID: "createRefund", ScopeHeaders: []string{"Stripe-Account"}}
	rc := claim("k-cli-refund-000000001", "createRefund")
	rc.ID.Scope = refundOp.RequestScope("acme", http.Header{"Stripe-Account": {"acct_7"}})
	if _, err := st.Reserve(ctx, rc); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := idemgen(t, "records", "get", "--dsn", dsn, "--tenant", "acme", "--key", "k-cli-0000000000000001")
	if code != exitOK {
		t.Fatalf("get: exit %d: %s", code, errOut)
	}
	var got struct {
		Found   bool
		Records []admin.RecordInfo
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	_, kh := runtime.LogDigests("acme", "k-cli-0000000000000001")
	if !got.Found || len(got.Records) != 1 || got.Records[0].State != "completed" || got.Records[0].Location != "/v1/payments/9" ||
		got.Records[0].Body != nil || got.Records[0].KeyHash != kh || strings.Contains(out, `"body"`) {
		t.Errorf("get: %s", out)
	}

	t.Setenv("IDEMGEN_DSN", dsn)
	code, out, errOut = idemgen(t, "records", "get", "--tenant", "acme", "--key", "k-cli-0000000000000001", "--operation", "captureCharge", "--body")
	got.Records = nil
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got.Records) != 1 || got.Records[0].State != "running" ||
		!got.Records[0].PerOperation || !got.Records[0].LeaseRunning {
		t.Errorf("get --operation: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = idemgen(t, "records", "get", "--tenant", "acme", "--key", "k-cli-refund-000000001", "--scope-header", "stripe-account: acct_7")
	got.Records = nil
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got.Records) != 1 ||
		got.Records[0].Operation != "createRefund" || got.Records[0].ScopeHeaders["Stripe-Account"] != "acct_7" {
		t.Errorf("get --scope-header: exit %d %s %s", code, out, errOut)
	}
	// A record of an operation declared scope: path (ACP), under the path's parameter values:
	// found with --route and --path, not without, and not at another path.
	pathOp := &runtime.Operation{ID: "completeCheckout", Path: "/checkout_sessions/{id}/complete", Scope: runtime.ScopePath}
	sk, ok := pathOp.RecordKeyAt("k-cli-path-0000000001", "/checkout_sessions/cs_1/complete")
	if !ok {
		t.Fatal("RecordKeyAt refused the path")
	}
	if _, err := st.Reserve(ctx, claim(sk, "completeCheckout")); err != nil {
		t.Fatal(err)
	}
	pathGet := func(path string) (int, string, string) {
		return idemgen(t, "records", "get", "--tenant", "acme", "--key", "k-cli-path-0000000001", "--operation", "completeCheckout",
			"--route", "/checkout_sessions/{id}/complete", "--path", path)
	}
	code, out, errOut = pathGet("/checkout_sessions/cs_1/complete")
	got.Records = nil
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got.Records) != 1 || got.Records[0].Operation != "completeCheckout" {
		t.Errorf("get --route --path: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = pathGet("/checkout_sessions/cs_2/complete")
	if code != exitOK || !strings.Contains(out, `"found": false`) {
		t.Errorf("get --path of another session: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = idemgen(t, "records", "get", "--tenant", "acme", "--key", "k-cli-path-0000000001", "--operation", "completeCheckout")
	if code != exitOK || !strings.Contains(out, `"found": false`) {
		t.Errorf("get without --path: exit %d %s %s", code, out, errOut)
	}
	if code, _, errOut = pathGet("/refunds/1"); code != exitUsage || !strings.Contains(errOut, "does not match") {
		t.Errorf("get --path off the route: exit %d %s", code, errOut)
	}

	code, out, _ = idemgen(t, "records", "get", "--tenant", "other", "--key", "k-cli-0000000000000001")
	if code != exitOK || !strings.Contains(out, `"found": false`) || !strings.Contains(out, `"records": []`) {
		t.Errorf("another tenant: exit %d %s", code, out)
	}

	// A SingleTenant service's records have the empty scope: --single-tenant finds them.
	single := claim("k-cli-single-00000001", "createPayment")
	single.ID.Scope = (&runtime.Operation{}).RequestScope("", http.Header{})
	if _, err := st.Reserve(ctx, single); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = idemgen(t, "records", "get", "--single-tenant", "--key", "k-cli-single-00000001")
	got.Records = nil
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || !got.Found || len(got.Records) != 1 ||
		got.Records[0].Operation != "createPayment" || got.Records[0].State != "running" {
		t.Errorf("get --single-tenant: exit %d %s %s", code, out, errOut)
	}

	code, out, errOut = idemgen(t, "records", "stats")
	var s store.Stats
	if err := json.Unmarshal([]byte(out), &s); code != exitOK || err != nil || s.Running != 4 || s.Completed != 1 || len(s.Operations) != 4 ||
		s.OldestRunning == nil || s.StorageBytes == 0 {
		t.Errorf("stats: exit %d %s %s", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"records", "get", "--tenant", "acme"}, exitUsage},
		{[]string{"records", "get", "--key", "k-cli-0000000000000001"}, exitUsage},
		{[]string{"records", "get", "--tenant", "acme", "--single-tenant", "--key", "k-cli-0000000000000001"}, exitUsage},
		{[]string{"records", "get", "--tenant", "acme", "--key", `"unterminated`}, exitUsage}, // a key with spaces is a valid opaque key; a broken sf-string is not a key
		{[]string{"records", "get", "--tenant", "acme", "--key", "k-cli-0000000000000001", "--scope-header", "no colon"}, exitUsage},
		{[]string{"records", "get", "--tenant", "acme", "--key", "k-cli-0000000000000001", "--path", "/checkout_sessions/cs_1"}, exitUsage},
		{[]string{"records", "stats", "--dsn", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, exitStore},
		{[]string{"records", "stats", "--dsn", "::not a dsn::"}, exitUsage},
	} {
		if code, _, errOut := idemgen(t, tc.args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut)
		}
	}
}

// withHour is c with a retention of an hour (and no tombstone).
func withHour(c store.Claim) store.Claim {
	c.Retention = time.Hour
	return c
}
