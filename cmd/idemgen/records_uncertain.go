package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/runtime/admin"
)

func newRecordsUncertainCmd(rf *recordsFlags) *cobra.Command {
	var since, format string
	var limit int
	cmd := &cobra.Command{
		Use:   "uncertain",
		Short: "List the lease-mode records whose outcome is uncertain, with their provider keys",
		Long: `List the uncertain records: lease-mode requests whose call phase recorded provider calls
(Lease.ProviderKey) that may have reached the provider, with no completion known. The process
died in the call phase (the lease ended: lease_ended), the completion failed after the calls
(completion_failed, outcome_unknown), or a retry took the claim over (taken_over). Each line
shows when the key was claimed, the operation, why, the lease, the record's digest (the store
keeps no tenant or key) and every provider call: its label, the provider key the handler sent
(search the provider's dashboard for it) and the amount. No secret is printed.

A retry with the same request resolves an uncertain record (it takes the claim over and the
provider deduplicates its call); otherwise reconcile with the provider's report:
idemgen reconcile --report FILE. docs/runtime.md, "Uncertain outcomes and reconciliation".`,
		Example: `  idemgen records uncertain --dsn "$DSN"
  idemgen records uncertain --since 24h --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := admin.UncertainOptions{Limit: limit}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				opts.Since = t
			}
			if limit < 0 {
				return &exitError{code: exitUsage, err: errorf("--limit must not be negative")}
			}
			if format != "text" && format != "json" {
				return &exitError{code: exitUsage, err: errorf("--format %q: want text or json", format)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), rf.timeout)
			defer cancel()
			st, closeStore, err := rf.inspector(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			recs, err := admin.Uncertain(ctx, st, opts)
			if err != nil {
				return &exitError{code: exitStore, err: err}
			}
			if format == "json" {
				return writeJSON(cmd, struct {
					Count   int                `json:"count"`
					Records []admin.RecordInfo `json:"records"`
				}{len(recs), recs})
			}
			return writeUncertain(cmd.OutOrStdout(), recs)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "only records claimed since this `TIME` (RFC 3339) or this long ago (24h)")
	fl.IntVar(&limit, "limit", 0, "at most `N` records, the oldest first (0: all)")
	fl.StringVar(&format, "format", "text", "output `FORMAT`: text (a table) or json")
	return cmd
}

// writeUncertain prints the uncertain records as a table.
func writeUncertain(w io.Writer, recs []admin.RecordInfo) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "No uncertain record.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIMED (UTC)\tOPERATION\tUNCERTAIN\tLEASE\tRECORD\tPROVIDER CALLS")
	for _, r := range recs {
		lease := ""
		if r.LeaseUntil != nil {
			lease = "ended " + r.LeaseUntil.Format("2006-01-02 15:04:05")
			if r.LeaseRunning {
				lease = "until " + r.LeaseUntil.Format("2006-01-02 15:04:05")
			}
		}
		var calls []string
		for _, c := range r.ProviderCalls {
			s := c.Label + " " + c.ProviderKey
			if c.Amount != nil {
				s += fmt.Sprintf(" %d %s", *c.Amount, c.Currency)
			}
			calls = append(calls, s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.CreatedAt.Format("2006-01-02 15:04:05"), r.Operation, r.Uncertain, lease, r.RecordRef, strings.Join(calls, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d uncertain records. Reconcile them with the provider's report: idemgen reconcile --report FILE\n", len(recs))
	return err
}

// parseSince reads --since: RFC 3339, or a duration back from now ("24h").
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errorf("--since %q: want an RFC 3339 time (2026-11-02T00:00:00Z) or a duration such as 24h", v)
}
