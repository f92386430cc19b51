package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The password of every DSN below: no message may show it.
const dsnPassword = "s3cret-pw-77"

// TestRecordsRefuseStoresTheyCannotOpen: records and reconcile open the store that --dsn's
// scheme names; a scheme that names no store, memstore (whose records live in the serving
// process), and a store without the capability the command reads through are usage errors
// that name --dsn; an unreachable store is exit 3. No message shows the DSN's password.
func TestRecordsRefuseStoresTheyCannotOpen(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.csv")
	writeFile(t, report, "idempotency_key,amount,currency,status,created\n")
	get := []string{"records", "get", "--tenant", "acme", "--key", "k-cli-0000000000000001"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{append(get, "--dsn", "mysql://root:"+dsnPassword+"@db/shop"), exitUsage, "--dsn mysql:// names no store idemgen can open (postgres://, postgresql://, redis://, rediss://"},
		{[]string{"records", "stats", "--dsn", "MySQL://root:" + dsnPassword + "@db/shop"}, exitUsage, "--dsn mysql:// names no store"},
		{[]string{"records", "uncertain", "--dsn", "mem://x:" + dsnPassword + "@local"}, exitUsage, "--dsn mem://: memstore keeps its records in the memory of the process that serves them"},
		{[]string{"reconcile", "--report", report, "--dsn", "memstore://x:" + dsnPassword + "@local"}, exitUsage, "--dsn memstore://: memstore keeps"},
		{[]string{"records", "stats", "--dsn", "postgres://u:" + dsnPassword + "@[::1"}, exitUsage, "--dsn is not a PostgreSQL connection string or URL"},
		// A key=value string whose password holds "://" has no scheme: it is PostgreSQL's form.
		{[]string{"records", "stats", "--dsn", "host=127.0.0.1 port=1 connect_timeout=2 password=" + dsnPassword + "://x"}, exitStore, "connect:"},
		{[]string{"records", "stats", "--dsn", "host=127.0.0.1 port=1 password='" + dsnPassword + "://x"}, exitUsage, "--dsn is not a PostgreSQL connection string or URL"},
		{[]string{"records", "stats", "--dsn", "redis://u:" + dsnPassword + "@host/a/b"}, exitUsage, "--dsn is not a Redis URL"},
		{[]string{"records", "stats", "--timeout", "3s", "--dsn", "postgres://u:" + dsnPassword + "@127.0.0.1:1/none?connect_timeout=2"}, exitStore, "connect:"},
		{[]string{"records", "stats", "--timeout", "3s", "--dsn", "redis://u:" + dsnPassword + "@127.0.0.1:1"}, exitStore, "connect:"},
	} {
		code, out, errOut := idemgen(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", tc.args, code, tc.code, tc.want, errOut)
		}
		if strings.Contains(out+errOut, dsnPassword) {
			t.Errorf("%v: the password is shown: %s%s", tc.args, out, errOut)
		}
	}
}

// `idemgen records` on runtime/redisstore's lease store, a real Redis: a record the store holds
// is found by tenant and key; reconcile refuses the store, which keeps no provider call log.
func TestRecordsOnRedis(t *testing.T) {
	addr := redistest.Addrs(t, redistest.Standalone)[0]
	prefix := redistest.Prefix(t)
	st, err := redisstore.New(redistest.NewClient(t, redistest.Standalone), redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const key = "k-cli-redis-0000000001"
	c := store.Claim{ID: store.ID{Scope: "acme", Key: key}, Operation: "createPayment", Retention: time.Hour, Lease: time.Minute,
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))}}
	if _, err := st.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	dsn := "redis://" + addr + "/0?prefix=" + prefix
	code, out, errOut := idemgen(t, "records", "get", "--dsn", dsn, "--tenant", "acme", "--key", key)
	var got struct {
		Found   bool
		Records []admin.RecordInfo
	}
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || !got.Found || len(got.Records) != 1 ||
		got.Records[0].Operation != "createPayment" || got.Records[0].State != "running" {
		t.Fatalf("records get on Redis: exit %d %s %s", code, out, errOut)
	}
	// Under another prefix the record is not there: the parameter reaches the store.
	if code, out, errOut := idemgen(t, "records", "get", "--dsn", "redis://"+addr+"?prefix=other:", "--tenant", "acme", "--key", key); code != exitOK || !strings.Contains(out, `"found": false`) {
		t.Errorf("records get under another prefix: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := idemgen(t, "records", "stats", "--dsn", dsn); code != exitOK || !strings.Contains(out, `"running": 1`) {
		t.Errorf("records stats on Redis: exit %d %s %s", code, out, errOut)
	}

	report := filepath.Join(t.TempDir(), "report.csv")
	writeFile(t, report, "idempotency_key,amount,currency,status,created\n")
	code, _, errOut = idemgen(t, "reconcile", "--report", report, "--dsn", dsn)
	if code != exitUsage || !strings.Contains(errOut, "--dsn redis:// names runtime/redisstore, which does not implement store.Reconcilable") {
		t.Errorf("reconcile on Redis: exit %d %s", code, errOut)
	}
}
