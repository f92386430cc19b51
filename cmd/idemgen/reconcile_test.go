package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// `idemgen records uncertain` and `idemgen reconcile` against a real PostgreSQL: a completed
// charge the report matches, one the report says failed, and an uncertain one the provider
// charged; bad flags and bad reports are usage errors that name what is wrong.
func TestReconcileCommands(t *testing.T) {
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
	pk := func(key string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(key))) }
	started := func(key string, lease time.Duration) (store.Claim, int64) {
		c := store.Claim{ID: store.ID{Scope: "acme", Key: key}, Operation: "createCharge", Retention: time.Hour, Lease: lease,
			Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))}}
		r, err := st.Reserve(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.BeginCall(ctx, c, r.Token, store.Call{Label: "charge", ProviderKey: pk(key), Amount: 500, Currency: "EUR"}); err != nil {
			t.Fatal(err)
		}
		return c, r.Token
	}
	for _, key := range []string{"k-matched-000000000001", "k-failed-0000000000001"} {
		c, token := started(key, time.Minute)
		if err := st.Complete(ctx, withHour(c), token, store.Response{Status: 201}); err != nil {
			t.Fatal(err)
		}
	}
	started("k-uncertain-0000000001", 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond)

	code, out, errOut := idemgen(t, "records", "uncertain", "--dsn", dsn)
	if code != exitOK || !strings.Contains(out, pk("k-uncertain-0000000001")) || !strings.Contains(out, "lease_ended") ||
		!strings.Contains(out, "500 EUR") || !strings.Contains(out, "1 uncertain records") {
		t.Fatalf("records uncertain: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = idemgen(t, "records", "uncertain", "--dsn", dsn, "--since", "1h", "--format", "json", "--limit", "5")
	var listed struct {
		Count   int `json:"count"`
		Records []struct {
			State string `json:"state"`
		} `json:"records"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || listed.Count != 1 || listed.Records[0].State != "uncertain" {
		t.Fatalf("records uncertain --format json: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--format", "xml"}, {"--limit", "-1"}} {
		if code, _, errOut := idemgen(t, append([]string{"records", "uncertain", "--dsn", dsn}, bad...)...); code != exitUsage || errOut == "" {
			t.Errorf("records uncertain %v: exit %d, want %d", bad, code, exitUsage)
		}
	}

	dir := t.TempDir()
	now := time.Now().UTC()
	report := filepath.Join(dir, "report.csv")
	writeFile(t, report, "Idempotency Key;Amount;Currency;Status;Created\n"+
		pk("k-matched-000000000001")+";5,00;eur;succeeded;"+now.Add(-time.Hour).Format(time.RFC3339)+"\n"+
		pk("k-failed-0000000000001")+";5,00;eur;failed;"+now.Format(time.RFC3339)+"\n"+
		pk("k-uncertain-0000000001")+";5,00;eur;succeeded;"+now.Add(time.Hour).Format(time.RFC3339)+"\n")
	base := []string{"reconcile", "--dsn", dsn, "--report", report, "--csv-delimiter", ";", "--key-column", "Idempotency Key",
		"--amount-column", "Amount", "--currency-column", "Currency", "--status-column", "Status", "--time-column", "Created"}

	// Decimal commas are not amounts: the line and the column are named.
	code, _, errOut = idemgen(t, base...)
	if code != exitUsage || !strings.Contains(errOut, "report line 2, Amount") {
		t.Fatalf("reconcile with decimal commas: exit %d, %s", code, errOut)
	}
	writeFile(t, report, strings.ReplaceAll(readFile(t, report), "5,00", "5.00"))
	metrics := filepath.Join(dir, "idemgen.prom")
	code, out, errOut = idemgen(t, append(base, "--amount-decimal", "--metrics-file", metrics)...)
	if code != exitDesync || !strings.Contains(out, "charged_no_record      line 4") || !strings.Contains(out, "record_no_charge       line 3") ||
		!strings.Contains(out, "Report: 3 lines: 1 matched") || !strings.Contains(out, "Resolvable: 1.") {
		t.Fatalf("reconcile: exit %d\n%s%s", code, out, errOut)
	}
	if m := readFile(t, metrics); !strings.Contains(m, `idemgen_reconcile_findings{class="charged_no_record"} 1`) ||
		!strings.Contains(m, "idemgen_reconcile_report_lines 3") || !strings.Contains(m, "idemgen_reconcile_last_run_timestamp_seconds") {
		t.Errorf("metrics file:\n%s", m)
	}
	code, out, _ = idemgen(t, append(base, "--amount-decimal", "--format", "json")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitDesync || len(lines) != 3 || !strings.Contains(lines[2], `"summary"`) || !strings.Contains(lines[0], `"class":"record_no_charge"`) {
		t.Fatalf("reconcile --format json: exit %d\n%s", code, out)
	}

	// A margin longer than the report's span leaves no window, and the summary says so.
	code, out, _ = idemgen(t, append(base, "--amount-decimal", "--margin", "3h")...)
	if code != exitDesync || !strings.Contains(out, "span less than --margin (3h0m0s)") {
		t.Fatalf("reconcile --margin 3h: exit %d\n%s", code, out)
	}

	for name, args := range map[string][]string{
		"no report":         {"reconcile", "--dsn", dsn},
		"missing file":      {"reconcile", "--dsn", dsn, "--report", filepath.Join(dir, "nope.csv")},
		"no key column":     {"reconcile", "--dsn", dsn, "--report", report, "--key-column", "-"},
		"bad delimiter":     append(append([]string{}, base...), "--csv-delimiter", ";;"),
		"unknown column":    {"reconcile", "--dsn", dsn, "--report", report, "--csv-delimiter", ";"},
		"resolve, nobody":   append(append([]string{}, base...), "--amount-decimal", "--resolve"),
		"resolve, no tty":   append(append([]string{}, base...), "--amount-decimal", "--resolve", "--operator", "ada"),
		"bad window":        append(append([]string{}, base...), "--from", "2026-11-02T00:00:00Z", "--to", "2026-11-01T00:00:00Z"),
		"bad template":      append(append([]string{}, base...), "--amount-decimal", "--resolve", "--yes", "--operator", "ada", "--response-template", "{{.x"),
		"bad status":        append(append([]string{}, base...), "--amount-decimal", "--resolve", "--yes", "--operator", "ada", "--response-status", "99"),
		"bad output format": append(append([]string{}, base...), "--format", "yaml"),
	} {
		if code, _, errOut := idemgen(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%s: exit %d, want %d (%s)", name, code, exitUsage, errOut)
		}
	}
	var audit int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_resolutions`).Scan(&audit); err != nil || audit != 0 {
		t.Fatalf("refused resolutions wrote %d audit rows (%v)", audit, err)
	}

	// The operator confirms: the uncertain charge is completed from its line with the template.
	code, out, errOut = idemgen(t, append(base, "--amount-decimal", "--resolve", "--yes", "--operator", "ada", "--reason", "test",
		"--response-status", "201", "--response-template", `{"amount":{{.Amount}},"currency":{{json (upper .Currency)}}}`)...)
	if code != exitDesync || !strings.Contains(out, "resolved      "+pk("k-uncertain-0000000001")+"  complete: the record was completed") ||
		!strings.Contains(out, "Resolved: 1 written, 0 not") {
		t.Fatalf("reconcile --resolve (record_no_charge remains): exit %d\n%s%s", code, out, errOut)
	}
	rec, found, err := st.Get(ctx, store.ID{Scope: "acme", Key: "k-uncertain-0000000001"})
	if err != nil || !found || rec.Response.Status != 201 || string(rec.Response.Body) != `{"amount":5.00,"currency":"EUR"}` {
		t.Fatalf("resolved record: %+v %s, %v %v", rec, rec.Response.Body, found, err)
	}
	if code, out, _ := idemgen(t, "records", "uncertain", "--dsn", dsn); code != exitOK || !strings.Contains(out, "No uncertain record.") {
		t.Errorf("records uncertain after the resolution: %d\n%s", code, out)
	}
}

func writeFile(t *testing.T, name, s string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
