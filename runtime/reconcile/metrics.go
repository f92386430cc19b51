package reconcile

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// WriteMetrics writes s in the Prometheus text exposition format (version 0.0.4), with the
// names, help and types of runtime/prometheus.ReconcileObserver: idemgen_reconcile_findings
// {class}, idemgen_reconcile_report_lines and idemgen_reconcile_last_run_timestamp_seconds. It
// is for a run that ends before anything scrapes it: `idemgen reconcile --metrics-file` writes
// it for node_exporter's textfile collector. Errors are w's.
func WriteMetrics(w io.Writer, s Summary) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# HELP idemgen_reconcile_findings %s\n# TYPE idemgen_reconcile_findings gauge\n", HelpFindings)
	for _, c := range Classes {
		fmt.Fprintf(b, "idemgen_reconcile_findings{class=%q} %d\n", string(c), s.Counts[c])
	}
	fmt.Fprintf(b, "# HELP idemgen_reconcile_last_run_timestamp_seconds %s\n# TYPE idemgen_reconcile_last_run_timestamp_seconds gauge\n", HelpLastRun)
	fmt.Fprintf(b, "idemgen_reconcile_last_run_timestamp_seconds %s\n", strconv.FormatFloat(float64(s.At.UnixNano())/1e9, 'g', -1, 64))
	fmt.Fprintf(b, "# HELP idemgen_reconcile_report_lines %s\n# TYPE idemgen_reconcile_report_lines gauge\n", HelpLines)
	fmt.Fprintf(b, "idemgen_reconcile_report_lines %d\n", s.Lines)
	return b.Flush()
}

// The help texts of the reconciliation metrics (WriteMetrics and
// runtime/prometheus.ReconcileObserver).
const (
	HelpFindings = "Findings of the last reconciliation with the provider's report, by class (charged_no_record: money moved, the client may not know)."
	HelpLines    = "Lines of the provider's report the last reconciliation read."
	HelpLastRun  = "Unix time the last reconciliation with the provider's report ended."
)
