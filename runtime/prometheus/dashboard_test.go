package prometheus

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// docs/monitoring ships a Grafana dashboard and Prometheus alert rules over this package's
// metrics. These tests keep them honest: every query names metrics this package exports (a
// renamed metric cannot leave a dead panel or an alert that never fires), every exported metric
// is on the dashboard, and, where promtool is installed, every query parses as PromQL.
// scripts/test.sh installs promtool and sets IDEMGEN_REQUIRE_PROMTOOL=1.

const monitoring = "../../docs/monitoring"

// exported returns the series names this package exports, histograms with their _bucket, _sum
// and _count series, and the family names.
func exported(t *testing.T) (series map[string]bool, families []string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	// One event of every kind, so that every vector has a series to gather.
	o.Outcome("op", runtime.ModeAtomic, runtime.OutcomeExecuted)
	o.ClaimLatency("op", runtime.ModeAtomic, time.Millisecond)
	o.Execution("op", runtime.ModeAtomic, runtime.OutcomeExecuted, time.Millisecond)
	o.Swept(1)
	o.SweepDone(store.SweepReport{Sampled: true, StaleRunning: map[string]int64{"op": 1}, Uncertain: map[string]int64{"op": 1}})
	o.Uncertain("op", store.UncertainCompletionFailed)
	// The reconciliation metrics come from a ReconcileObserver, in the process that reconciles.
	ro, err := NewReconcileObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	ro.Reconciled(reconcile.Summary{Counts: map[reconcile.Class]int64{reconcile.ChargedNoRecord: 1}, Lines: 1, At: time.Now()})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series = map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		families = append(families, name)
		series[name] = true
		if mf.GetType().String() == "HISTOGRAM" {
			series[name+"_bucket"], series[name+"_sum"], series[name+"_count"] = true, true, true
		}
	}
	sort.Strings(families)
	return series, families
}

var metricName = regexp.MustCompile(`\bidemgen_[a-zA-Z0-9_:]+`)

// query is one PromQL expression of a dashboard or rule file, with where it is.
type query struct{ where, expr string }

// dashboardQueries walks the dashboard JSON for every target's expr and every templating query.
func dashboardQueries(t *testing.T) (promql []query, templating []query) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoring, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title, UID string
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name       string
				Type       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	type panel struct {
		Title   string
		Type    string
		Panels  []json.RawMessage
		Targets []struct {
			RefID string
			Expr  string
		}
	}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("dashboard.json: panel: %v", err)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.RefID == "" || strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: a target without refId or expr", p.Title)
				}
				promql = append(promql, query{"panel " + p.Title + " " + tg.RefID, tg.Expr})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			templating = append(templating, query{"variable " + v.Name, v.Definition})
		}
	}
	return promql, templating
}

// alertQueries reads every rule's expr from alerts.yaml.
func alertQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoring, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var qs []query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{"alert " + r.Alert + r.Record, r.Expr})
		}
	}
	if len(qs) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
	return qs
}

// TestDashboardNamesExportedMetrics loads the dashboard and checks that every query names only
// metrics this package exports, that each names at least one, and that every exported metric
// appears on some panel; the alert rules are held to the first two.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	series, families := exported(t)
	promql, templating := dashboardQueries(t)
	shown := map[string]bool{}
	check := func(qs []query) {
		for _, q := range qs {
			names := metricName.FindAllString(q.expr, -1)
			if len(names) == 0 {
				t.Errorf("%s names no idemgen metric: %s", q.where, q.expr)
			}
			for _, n := range names {
				if !series[n] {
					t.Errorf("%s names %s, which runtime/prometheus does not export", q.where, n)
				}
				shown[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
			}
		}
	}
	check(promql)
	check(templating)
	for _, f := range families {
		if !shown[f] {
			t.Errorf("exported metric %s is on no dashboard panel", f)
		}
	}
	check(alertQueries(t))
}

// grafanaVars are the dashboard's variables, replaced by what Grafana would put there so that
// the queries are plain PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$operation", ".*")

// TestDashboardQueriesParse runs every dashboard query through promtool, as the expression of a
// recording rule.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool not found (Debian: apt-get install prometheus): run the tests with `make test`"
		if os.Getenv("IDEMGEN_REQUIRE_PROMTOOL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	promql, _ := dashboardQueries(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range promql {
		expr := grafanaVars.Replace(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: an unknown variable in %s", q.where, q.expr)
		}
		e, _ := json.Marshal(expr) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: idemgen_dashboard_query_%d\n        expr: %s\n", i, e)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
