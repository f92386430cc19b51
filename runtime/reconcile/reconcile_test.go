package reconcile_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// newStore returns a pgstore on a fresh migrated database, in the layout of
// IDEMGEN_PG_LAYOUT.
func newStore(t *testing.T) *pgstore.Store {
	t.Helper()
	pool := pgtest.NewPool(t, 4)
	partitioned := os.Getenv("IDEMGEN_PG_LAYOUT") == "partitioned"
	migrate := pgstore.Migrate
	if partitioned {
		migrate = pgstore.MigratePartitioned
	}
	if err := migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pgstore.New(pool, pgstore.Options{Partitioned: partitioned})
}

// fixture writes records and calls through the store, as the runtime's lease machine does.
type fixture struct {
	t  *testing.T
	st *pgstore.Store
}

func (f fixture) pk(key string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte("pk/"+key))) }

// started claims key with lease and records its charge of 1250 EUR.
func (f fixture) started(key string, lease time.Duration) (store.Claim, int64) {
	f.t.Helper()
	ctx := context.Background()
	c := store.Claim{ID: store.ID{Scope: "acme", Key: key}, Operation: "createCharge",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))},
		Retention:   time.Hour, Lease: lease}
	r, err := f.st.Reserve(ctx, c)
	if err != nil || !r.Claimed() {
		f.t.Fatalf("Reserve %s: %+v %v", key, r, err)
	}
	if err := f.st.BeginCall(ctx, c, r.Token, store.Call{Label: "charge", ProviderKey: f.pk(key), Amount: 1250, Currency: "EUR"}); err != nil {
		f.t.Fatal(err)
	}
	return c, r.Token
}

func (f fixture) completed(key string, status int) {
	f.t.Helper()
	c, token := f.started(key, time.Minute)
	if err := f.st.Complete(context.Background(), withRetention(c, time.Hour), token, store.Response{Status: status}); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) released(key string) {
	f.t.Helper()
	c, token := f.started(key, time.Minute)
	if err := f.st.Release(context.Background(), c.ID, token); err != nil {
		f.t.Fatal(err)
	}
}

// TestRun builds one record of every situation on PostgreSQL, reconciles a report against them,
// resolves what can be resolved, and reconciles again.
func TestRun(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	f := fixture{t, st}
	f.completed("matched", 201)
	f.completed("other-amount", 201)
	f.completed("failed-at-provider", 201)
	f.completed("missing-at-provider", 201)
	f.completed("declined", 402)
	f.released("released-charged")
	f.started("in-flight", time.Minute)
	for _, k := range []string{"uncertain-charged", "uncertain-failed", "uncertain-unreported"} {
		f.started(k, 50*time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)

	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	var b strings.Builder
	b.WriteString("id,idempotency_key,amount,currency,status,created\n")
	line := func(id, key string, amount int, status string, d time.Duration) {
		fmt.Fprintf(&b, "%s,%s,%d,eur,%s,%s\n", id, key, amount, status, at(d))
	}
	line("ch_1", f.pk("matched"), 1250, "succeeded", -time.Hour)
	line("ch_2", f.pk("other-amount"), 1300, "succeeded", 0)
	line("ch_3", f.pk("failed-at-provider"), 1250, "failed", 0)
	line("ch_4", f.pk("declined"), 1250, "declined", 0)
	line("ch_5", f.pk("released-charged"), 1250, "succeeded", 0)
	line("ch_6", f.pk("in-flight"), 1250, "succeeded", 0)
	line("ch_7", f.pk("uncertain-charged"), 1250, "succeeded", 0)
	line("ch_8", f.pk("uncertain-failed"), 1250, "failed", 0)
	line("ch_9", f.pk("never-recorded"), 1250, "succeeded", 0)
	line("ch_10", "manual-charge-from-the-dashboard", 500, "succeeded", 0)
	line("ch_11", f.pk("matched"), 1250, "refunded", time.Hour)

	var streamed []reconcile.Finding
	opts := reconcile.Options{BatchSize: 3, Finding: func(fd reconcile.Finding) error {
		streamed = append(streamed, fd)
		return nil
	}}
	res, err := reconcile.Run(ctx, st, strings.NewReader(b.String()), opts)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]reconcile.Finding{}
	for _, fd := range streamed {
		byKey[fd.ProviderKey] = fd
	}
	for key, want := range map[string]struct {
		class  reconcile.Class
		record string
		action reconcile.Action
	}{
		"other-amount":         {reconcile.AmountMismatch, reconcile.RecordCompleted, reconcile.NoAction},
		"failed-at-provider":   {reconcile.RecordNoCharge, reconcile.RecordCompleted, reconcile.NoAction},
		"missing-at-provider":  {reconcile.RecordNoCharge, reconcile.RecordCompleted, reconcile.NoAction},
		"released-charged":     {reconcile.ChargedNoRecord, reconcile.RecordReleased, reconcile.Complete},
		"uncertain-charged":    {reconcile.ChargedNoRecord, reconcile.RecordUncertain, reconcile.Complete},
		"uncertain-failed":     {reconcile.UncertainNotCharged, reconcile.RecordUncertain, reconcile.Release},
		"uncertain-unreported": {reconcile.UncertainUnreported, reconcile.RecordUncertain, reconcile.NoAction},
		"never-recorded":       {reconcile.ChargedNoRecord, reconcile.RecordUnknown, reconcile.NoAction},
	} {
		got, ok := byKey[f.pk(key)]
		if !ok || got.Class != want.class || got.Record != want.record || got.Action != want.action {
			t.Errorf("%s: %s/%s/%q (%s), want %s/%s/%q", key, got.Class, got.Record, got.Action, got.Detail, want.class, want.record, want.action)
		}
	}
	if len(streamed) != 8 {
		t.Errorf("%d findings, want 8: %+v", len(streamed), streamed)
	}
	want := map[reconcile.Class]int64{reconcile.ChargedNoRecord: 3, reconcile.RecordNoCharge: 2, reconcile.AmountMismatch: 1,
		reconcile.UncertainNotCharged: 1, reconcile.UncertainUnreported: 1}
	for c, n := range want {
		if res.Counts[c] != n {
			t.Errorf("Counts[%s] = %d, want %d", c, res.Counts[c], n)
		}
	}
	if res.Lines != 11 || res.Foreign != 1 || res.Matched != 2 || res.InFlight != 1 || res.Ignored != 1 || !res.Desync() {
		t.Errorf("result %+v", res)
	}
	if res.Window.From.IsZero() || len(res.Resolvable) != 3 {
		t.Errorf("window %v, %d resolvable, want 3", res.Window, len(res.Resolvable))
	}

	// Resolve: the uncertain charged record completes with the report's line, the uncertain
	// failed one is released, the released call's log is settled.
	if _, err := reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{}); err == nil {
		t.Error("Resolve without an operator must fail")
	}
	done, err := reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{Operator: "ada", Reason: "test",
		Response: reconcile.ReportResponse(201)})
	if err != nil || len(done) != 3 {
		t.Fatalf("Resolve: %d, %v", len(done), err)
	}
	for _, d := range done {
		wantRecord := d.Finding.Record == reconcile.RecordUncertain
		if d.Err != nil || d.Done.Record != wantRecord {
			t.Errorf("%s: %+v, %v; want record written %v", d.Finding.ProviderKey, d.Done, d.Err, wantRecord)
		}
	}
	rec, found, err := st.Get(ctx, store.ID{Scope: "acme", Key: "uncertain-charged"})
	if err != nil || !found || rec.State != store.Completed || rec.Response.Status != 201 ||
		!strings.Contains(string(rec.Response.Body), `"id":"ch_7"`) {
		t.Fatalf("resolved record: %+v %s, found %v, %v", rec, rec.Response.Body, found, err)
	}
	if _, found, _ := st.Get(ctx, store.ID{Scope: "acme", Key: "uncertain-failed"}); found {
		t.Error("the released record is still there")
	}
	again, err := reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{Operator: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range again {
		if d.Err == nil {
			t.Errorf("a second resolution of %s was written", d.Finding.ProviderKey)
		}
	}

	// Again: what was resolved now agrees with the report.
	res, err = reconcile.Run(ctx, st, strings.NewReader(b.String()), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counts[reconcile.ChargedNoRecord] != 1 || res.Counts[reconcile.UncertainNotCharged] != 0 || len(res.Resolvable) != 0 {
		t.Errorf("after the resolutions: %+v", res.Counts)
	}
}

// A report without times checks the records' side only in an explicit window.
func TestRunWithoutTimes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	f := fixture{t, st}
	f.completed("missing-at-provider", 201)
	report := "idempotency_key,status\n" + f.pk("nobody") + ",failed\n"
	opts := reconcile.Options{Columns: reconcile.Columns{Amount: "-", Currency: "-", Time: "-"}}
	res, err := reconcile.Run(ctx, st, strings.NewReader(report), opts)
	if err != nil || !res.Window.From.IsZero() || res.Counts[reconcile.RecordNoCharge] != 0 || res.Unknown != 1 {
		t.Fatalf("no window: %+v, %v", res, err)
	}
	opts.From, opts.To = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	res, err = reconcile.Run(ctx, st, strings.NewReader(report), opts)
	if err != nil || res.Counts[reconcile.RecordNoCharge] != 1 {
		t.Fatalf("explicit window: %+v, %v", res, err)
	}
}

// A report whose times span less than the margin skips the records' side, and says why: its
// span is in the result (one line, as a service that has taken one charge writes).
func TestRunShorterThanTheMargin(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	f := fixture{t, st}
	f.completed("charged", 201)
	at := time.Now().UTC().Truncate(time.Second)
	report := "idempotency_key,amount,currency,status,created\n" + f.pk("charged") + ",1250,eur,succeeded," + at.Format(time.RFC3339) + "\n"
	res, err := reconcile.Run(ctx, st, strings.NewReader(report), reconcile.Options{})
	if err != nil || !res.Window.From.IsZero() || !res.Span.First.Equal(at) || !res.Span.Last.Equal(at) || res.Matched != 1 {
		t.Fatalf("one line: window %v, span %v, %+v, %v", res.Window, res.Span, res, err)
	}
}

// withRetention is c with retention r (and no tombstone).
func withRetention(c store.Claim, r time.Duration) store.Claim {
	c.Retention = r
	return c
}
