package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// reconcileFlags are the flags of idemgen reconcile.
type reconcileFlags struct {
	report, reportFormat, comma                 string
	cols                                        reconcile.Columns
	decimal, complete                           bool
	charged, notCharged                         []string
	from, to                                    string
	margin                                      time.Duration
	format, metricsFile                         string
	resolve, yes                                bool
	operator, reason, responseTemplate, tplFile string
	responseStatus, concurrency                 int
}

func newReconcileCmd() *cobra.Command {
	var rf recordsFlags
	var f reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile --report FILE",
		Short: "Match a payment provider's report against the records by provider key, and list every desynchronisation",
		Long: `Match a payment provider's report (its export of charges: provider idempotency key, amount,
currency, status, time) against the provider call log of the idempotency store, by the
provider key that lease-mode handlers send (Lease.ProviderKey), and list every
desynchronisation, per class, with counts:

  charged_no_record      the provider charged, and there is no completed record of a success:
                         money moved and the client may not know. The record is uncertain
                         (resolvable), released or absent (a late retry runs again under the
                         same provider key), completed with a failure, or unknown
  record_no_charge       a record completed with a success, and the provider's report shows
                         the call failed or has no line for it
  amount_mismatch        both charged, with a different amount or currency
  uncertain_not_charged  a record still uncertain that the report resolves as not charged
  uncertain_unreported   a record still uncertain that the report does not mention

It reads the report streaming and the records by index, and never changes a record by
itself. With --resolve, after the operator confirms (on the terminal, or --yes), it writes
the resolutions: an uncertain record the provider charged is completed with the provider's
outcome (the report's line as JSON, or --response-template), so a late retry replays it;
one it did not charge is released. Each resolution is appended to the audit trail
(idempotency_resolutions) with --operator and --reason.

Report columns are named by --key-column, --status-column, --amount-column,
--currency-column and --time-column (CSV header names, or JSON members: a name starting
with / is a JSON pointer); "-" for a column the report lacks. Amounts are integers in minor
units, or decimals with --amount-decimal. Times bound the record-side checks (records the
report does not mention): set --from and --to for a report without times.

Output: one line per finding, then a summary (--format json: JSON lines, the last one
{"summary": ...}). --metrics-file writes the idemgen_reconcile_* gauges for node_exporter's
textfile collector (docs/monitoring). Exit codes: 0 no desynchronisation left, 2 wrong
flags or an unreadable report (the line and column are named), 3 the store failed, 4 a
desynchronisation (an uncertain record alone is not one). docs/runtime.md, "Uncertain
outcomes and reconciliation".`,
		Example: `  idemgen reconcile --dsn "$DSN" --report stripe-2026-11-02.csv
  idemgen reconcile --report export.jsonl --key-column /metadata/idempotency_key --amount-decimal
  idemgen reconcile --report stripe-2026-11-02.csv --resolve --operator ada@example.com --reason "daily report"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReconcile(cmd, &rf, &f) },
	}
	rf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.report, "report", "", "the provider's report `FILE` (CSV or JSON lines; - reads standard input)")
	fl.StringVar(&f.reportFormat, "report-format", "auto", "the report's `FORMAT`: csv, jsonl, or auto (by its first byte)")
	fl.StringVar(&f.comma, "csv-delimiter", ",", "the CSV field `DELIMITER` (one character; \\t for tabs)")
	d := reconcile.DefaultColumns
	fl.StringVar(&f.cols.Key, "key-column", d.Key, "the `COLUMN` holding the provider idempotency key")
	fl.StringVar(&f.cols.Status, "status-column", d.Status, "the `COLUMN` holding the charge's status")
	fl.StringVar(&f.cols.Amount, "amount-column", d.Amount, "the `COLUMN` holding the amount (- for none)")
	fl.StringVar(&f.cols.Currency, "currency-column", d.Currency, "the `COLUMN` holding the currency (- for none)")
	fl.StringVar(&f.cols.Time, "time-column", d.Time, "the `COLUMN` holding the charge's time (- for none)")
	fl.BoolVar(&f.decimal, "amount-decimal", false, "amounts are decimals in major units (12.50), not integers in minor units")
	fl.StringSliceVar(&f.charged, "charged-status", reconcile.DefaultCharged, "`STATUSES` of a charge that moved money (comma-separated, any case)")
	fl.StringSliceVar(&f.notCharged, "not-charged-status", reconcile.DefaultNotCharged, "`STATUSES` of a charge that did not; others (pending, refunded) are not compared")
	fl.StringVar(&f.from, "from", "", "record-side checks from this `TIME` (RFC 3339; default: the report's earliest line)")
	fl.StringVar(&f.to, "to", "", "record-side checks until this `TIME` (RFC 3339; default: the report's latest line)")
	fl.DurationVar(&f.margin, "margin", 5*time.Minute, "leave the window's last `DURATION` out of the record-side checks (charges dated after the report's end)")
	fl.BoolVar(&f.complete, "report-complete", false, "the report lists every call the provider received in its window: an uncertain record it does not mention never charged")
	fl.IntVar(&f.concurrency, "concurrency", 4, "`N` reads of the call log in flight at once (each a database connection)")
	fl.StringVar(&f.format, "format", "text", "output `FORMAT`: text or json (JSON lines)")
	fl.StringVar(&f.metricsFile, "metrics-file", "", "write the run's idemgen_reconcile_* metrics to this `FILE` (Prometheus text format, replaced atomically)")
	fl.BoolVar(&f.resolve, "resolve", false, "write the resolutions of uncertain records after confirmation (needs --operator)")
	fl.BoolVar(&f.yes, "yes", false, "with --resolve: do not ask for confirmation")
	fl.StringVar(&f.operator, "operator", "", "who confirms the resolutions (`NAME` in the audit trail)")
	fl.StringVar(&f.reason, "reason", "", "why, in the audit trail (`TEXT`: a ticket, the report's date)")
	fl.IntVar(&f.responseStatus, "response-status", 200, "the `STATUS` a resolved record replays")
	fl.StringVar(&f.responseTemplate, "response-template", "", "the body a resolved record replays: a Go `TEMPLATE` over the report line's columns ({{.id}}; functions json, upper, lower); default: the line as JSON")
	fl.StringVar(&f.tplFile, "response-template-file", "", "--response-template read from `FILE`")
	return cmd
}

func runReconcile(cmd *cobra.Command, rf *recordsFlags, f *reconcileFlags) error {
	opts, err := f.options()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var respond func(reconcile.Finding) (store.Response, error)
	if f.resolve {
		if f.operator == "" {
			return &exitError{code: exitUsage, err: errorf("--resolve needs --operator (who confirms, for the audit trail)")}
		}
		if respond, err = f.responder(); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	report, closeReport, err := f.openReport(cmd.InOrStdin())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	defer closeReport()
	var summary *reconcile.Summary
	if f.metricsFile != "" {
		opts.Observer = observerFunc(func(s reconcile.Summary) { summary = &s })
	}

	ctx := cmd.Context()
	rf.maxConns = int32(opts.Concurrency + 1)
	st, closeStore, err := rf.reconcilable(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	out := &reconcileOutput{w: cmd.OutOrStdout(), json: f.format == "json", margin: f.margin}
	opts.Finding = out.finding
	res, err := reconcile.Run(ctx, st, report, opts)
	var le *reconcile.LineError
	switch {
	case errors.As(err, &le):
		return &exitError{code: exitUsage, err: err}
	case err != nil && strings.HasPrefix(err.Error(), "report"):
		return &exitError{code: exitUsage, err: err}
	case err != nil:
		return &exitError{code: exitStore, err: err}
	}
	if summary != nil {
		if err := writeMetricsFile(f.metricsFile, *summary); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--metrics-file: %w", err)}
		}
	}
	var resolved []reconcile.Resolution
	if f.resolve && len(res.Resolvable) > 0 {
		out.summary(res, nil)
		if err := f.confirm(cmd, res); err != nil {
			return err
		}
		resolved, err = reconcile.Resolve(ctx, st, res.Resolvable, reconcile.ResolveOptions{Operator: f.operator, Reason: f.reason, Response: respond})
		for _, r := range resolved {
			out.resolution(r)
		}
		if err != nil {
			return &exitError{code: exitStore, err: err}
		}
	}
	out.summary(res, resolved)
	if left := desyncLeft(res, resolved); left > 0 {
		return &exitError{code: exitDesync}
	}
	return nil
}

// observerFunc is a reconcile.Observer.
type observerFunc func(reconcile.Summary)

func (f observerFunc) Reconciled(s reconcile.Summary) { f(s) }

// writeMetricsFile replaces file with the run's metrics (reconcile.WriteMetrics) through a
// temporary file in its folder, so that the textfile collector never reads half of it.
func writeMetricsFile(file string, s reconcile.Summary) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := reconcile.WriteMetrics(tmp, s); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// desyncLeft is the number of desynchronisations that no resolution settled.
func desyncLeft(res *reconcile.Result, resolved []reconcile.Resolution) int64 {
	var n int64
	for c, k := range res.Counts {
		if c.Desync() {
			n += k
		}
	}
	for _, r := range resolved {
		if r.Err == nil && r.Finding.Class.Desync() {
			n--
		}
	}
	return n
}

func (f *reconcileFlags) options() (reconcile.Options, error) {
	var o reconcile.Options
	var err error
	if f.report == "" {
		return o, errorf("reconcile needs --report FILE (the provider's report)")
	}
	if o.Format, err = reconcile.ParseFormat(f.reportFormat); err != nil {
		return o, err
	}
	switch c := strings.ReplaceAll(f.comma, `\t`, "\t"); {
	case len([]rune(c)) != 1 || c == "\n" || c == "\r" || c == `"`:
		return o, errorf("--csv-delimiter %q: want one character other than a quote or a line break", f.comma)
	default:
		o.Comma = []rune(c)[0]
	}
	if f.format != "text" && f.format != "json" {
		return o, errorf("--format %q: want text or json", f.format)
	}
	if f.cols.Key == "-" || f.cols.Status == "-" || f.cols.Key == "" || f.cols.Status == "" {
		return o, errorf("--key-column and --status-column name columns the report must have")
	}
	if f.concurrency < 1 || f.concurrency > 64 {
		return o, errorf("--concurrency %d: want 1 to 64", f.concurrency)
	}
	o.Columns, o.AmountDecimal, o.ReportComplete, o.Margin, o.Concurrency = f.cols, f.decimal, f.complete, f.margin, f.concurrency
	o.Charged, o.NotCharged = f.charged, f.notCharged
	for name, v := range map[string]*time.Time{f.from: &o.From, f.to: &o.To} {
		if name == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, name)
		if err != nil {
			return o, errorf("--from/--to %q: want an RFC 3339 time (2026-11-02T00:00:00Z)", name)
		}
		*v = t
	}
	if !o.From.IsZero() && !o.To.IsZero() && !o.From.Before(o.To) {
		return o, errorf("--from must be before --to")
	}
	return o, nil
}

// openReport opens --report (- for stdin).
func (f *reconcileFlags) openReport(stdin io.Reader) (io.Reader, func(), error) {
	if f.report == "-" {
		return stdin, func() {}, nil
	}
	file, err := os.Open(f.report)
	if err != nil {
		return nil, nil, fmt.Errorf("--report: %w", err)
	}
	return file, func() { file.Close() }, nil
}

// responder builds the response of a completed resolution: the report line as JSON, or the
// --response-template over its columns.
func (f *reconcileFlags) responder() (func(reconcile.Finding) (store.Response, error), error) {
	if f.responseStatus < 200 || f.responseStatus > 599 {
		return nil, errorf("--response-status %d: want a final HTTP status (200 to 599)", f.responseStatus)
	}
	text := f.responseTemplate
	if f.tplFile != "" {
		if text != "" {
			return nil, errorf("--response-template and --response-template-file are exclusive")
		}
		b, err := os.ReadFile(f.tplFile)
		if err != nil {
			return nil, fmt.Errorf("--response-template-file: %w", err)
		}
		text = string(b)
	}
	if text == "" {
		return reconcile.ReportResponse(f.responseStatus), nil
	}
	tpl, err := template.New("response").Option("missingkey=error").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"upper": func(v any) string { return strings.ToUpper(fmt.Sprint(v)) },
		"lower": func(v any) string { return strings.ToLower(fmt.Sprint(v)) },
	}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("--response-template: %w", err)
	}
	status := f.responseStatus
	return func(fd reconcile.Finding) (store.Response, error) {
		if fd.Line == nil {
			return store.Response{}, errors.New("no report line")
		}
		var fields map[string]any
		d := json.NewDecoder(bytes.NewReader(fd.Line.JSON()))
		d.UseNumber()
		if err := d.Decode(&fields); err != nil {
			return store.Response{}, err
		}
		var b bytes.Buffer
		if err := tpl.Execute(&b, fields); err != nil {
			return store.Response{}, fmt.Errorf("--response-template on report line %d: %w", fd.Line.Number, err)
		}
		body := b.Bytes()
		header := []byte(`{"Content-Type":["text/plain; charset=utf-8"]}`)
		if json.Valid(body) {
			header = []byte(`{"Content-Type":["application/json"]}`)
		}
		return store.Response{Status: status, Header: header, Body: body}, nil
	}, nil
}

// confirm asks the operator on the terminal, unless --yes.
func (f *reconcileFlags) confirm(cmd *cobra.Command, res *reconcile.Result) error {
	if f.yes {
		return nil
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if fi, err := os.Stdin.Stat(); !ok || in != os.Stdin || err != nil || fi.Mode()&os.ModeCharDevice == 0 || f.report == "-" {
		return &exitError{code: exitUsage, err: errorf("--resolve writes records: confirm on a terminal, or pass --yes (nothing was written)")}
	}
	complete, release := 0, 0
	for _, fd := range res.Resolvable {
		if fd.Action == reconcile.Complete {
			complete++
		} else {
			release++
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Resolve %d records (%d completed with the provider's outcome, %d released) as %q? [y/N] ", complete+release, complete, release, f.operator)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return &exitError{code: exitUsage, err: errorf("not confirmed: nothing was written")}
	}
	return nil
}

// reconcileOutput prints findings, resolutions and the summary, as text or JSON lines.
type reconcileOutput struct {
	w    io.Writer
	json bool
	// margin is --margin, named when it left no window for the record-side checks.
	margin time.Duration
}

func (o *reconcileOutput) finding(fd reconcile.Finding) error {
	if o.json {
		b, err := json.Marshal(fd)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.w, "%s\n", b)
		return err
	}
	where := "-"
	if fd.Line != nil {
		where = fmt.Sprintf("line %d", fd.Line.Number)
	}
	action := string(fd.Action)
	if action == "" {
		action = "-"
	}
	_, err := fmt.Fprintf(o.w, "%-21s  %-10s  %s  %-9s  %-8s  %s\n", fd.Class, where, fd.ProviderKey, fd.Record, action, fd.Detail)
	return err
}

func (o *reconcileOutput) resolution(r reconcile.Resolution) {
	errText := ""
	if r.Err != nil {
		errText = r.Err.Error()
	}
	if o.json {
		b, _ := json.Marshal(map[string]any{"resolution": map[string]any{
			"provider_key": r.Finding.ProviderKey, "class": r.Finding.Class, "action": r.Action,
			"record_written": r.Done.Record, "error": errText}})
		fmt.Fprintf(o.w, "%s\n", b)
		return
	}
	switch {
	case r.Err != nil:
		fmt.Fprintf(o.w, "not resolved  %s  %s\n", r.Finding.ProviderKey, errText)
	case r.Done.Record:
		fmt.Fprintf(o.w, "resolved      %s  %s: the record was %s\n", r.Finding.ProviderKey, r.Action, map[reconcile.Action]string{reconcile.Complete: "completed with the provider's outcome", reconcile.Release: "released"}[r.Action])
	default:
		fmt.Fprintf(o.w, "resolved      %s  the call log (the record is gone: a late retry runs again under this provider key)\n", r.Finding.ProviderKey)
	}
}

// summary prints the counts; resolved, when the resolutions were written.
func (o *reconcileOutput) summary(res *reconcile.Result, resolved []reconcile.Resolution) {
	written, failed := 0, 0
	for _, r := range resolved {
		if r.Err == nil {
			written++
		} else {
			failed++
		}
	}
	if o.json {
		counts := map[string]int64{}
		for _, c := range reconcile.Classes {
			counts[string(c)] = res.Counts[c]
		}
		s := map[string]any{"lines": res.Lines, "foreign": res.Foreign, "ignored": res.Ignored, "matched": res.Matched,
			"in_flight": res.InFlight, "unknown": res.Unknown, "counts": counts, "resolvable": len(res.Resolvable),
			"resolved": written, "not_resolved": failed, "duration_ms": res.Duration.Milliseconds()}
		if !res.Window.From.IsZero() {
			s["window"] = map[string]time.Time{"from": res.Window.From, "to": res.Window.To}
		}
		b, _ := json.Marshal(map[string]any{"summary": s})
		fmt.Fprintf(o.w, "%s\n", b)
		return
	}
	fmt.Fprintf(o.w, "\nReport: %d lines: %d matched, %d in flight, %d not idemgen's provider keys, %d with another status, %d not charged and unknown.\n",
		res.Lines, res.Matched, res.InFlight, res.Foreign, res.Ignored, res.Unknown)
	switch {
	case res.Window.From.IsZero() && res.Span.First.IsZero():
		fmt.Fprintln(o.w, "Record-side checks skipped: the report has no times (set --from and --to).")
	case res.Window.From.IsZero():
		fmt.Fprintf(o.w, "Record-side checks skipped: the report's times (%s to %s) span less than --margin (%s): set --from and --to.\n",
			res.Span.First.Format(time.RFC3339), res.Span.Last.Format(time.RFC3339), o.margin)
	default:
		fmt.Fprintf(o.w, "Record-side checks: calls started from %s to %s.\n", res.Window.From.Format(time.RFC3339), res.Window.To.Format(time.RFC3339))
	}
	notes := map[reconcile.Class]string{reconcile.ChargedNoRecord: "money moved, the client may not know"}
	for _, c := range reconcile.Classes {
		fmt.Fprintf(o.w, "  %-21s  %6d  %s\n", c, res.Counts[c], notes[c])
	}
	switch {
	case resolved != nil:
		fmt.Fprintf(o.w, "Resolved: %d written, %d not (moved on since they were read).\n", written, failed)
	case len(res.Resolvable) > 0:
		fmt.Fprintf(o.w, "Resolvable: %d. Run again with --resolve --operator NAME to write them.\n", len(res.Resolvable))
	}
}
