package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/store"
)

// The records commands read a service's idempotency store for support staff, through
// store.Inspector, opening the store that --dsn's scheme names (stores.go): the same data as
// admin.Lookup and the support page (runtime/admin), as JSON. They never write.

// recordsFlags are the flags every records command shares.
type recordsFlags struct {
	dsn     string
	timeout time.Duration
	// maxConns is the pool's size; 0: 2.
	maxConns int32
}

func (f *recordsFlags) register(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.dsn, "dsn", "", "`URL` of the service's store, whose scheme names it: postgres:// or postgresql:// (or a PostgreSQL key=value string), redis:// or rediss:// (default $IDEMGEN_DSN, then $DATABASE_URL)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this `DURATION` (connecting and reading)")
}

// inspector opens the store that the DSN's scheme names (stores.go) for reading, through
// store.Inspector; the caller calls closeFn.
func (f *recordsFlags) inspector(ctx context.Context) (st store.Store, closeFn func(), err error) {
	dsn, err := resolveDSN(f.dsn, "records")
	if err != nil {
		return nil, nil, err
	}
	st, _, closeFn, err = openStore[store.Inspector](ctx, dsn, openOptions{maxConns: f.maxConns}, "store.Inspector (records are read through it)")
	return st, closeFn, err
}

// reconcilable opens the store that the DSN's scheme names through store.Reconcilable (the
// provider call log and resolutions); the caller calls closeFn.
func (f *recordsFlags) reconcilable(ctx context.Context) (rc store.Reconcilable, closeFn func(), err error) {
	dsn, err := resolveDSN(f.dsn, "reconcile")
	if err != nil {
		return nil, nil, err
	}
	_, rc, closeFn, err = openStore[store.Reconcilable](ctx, dsn, openOptions{maxConns: f.maxConns}, "store.Reconcilable (it keeps no provider call log: reconcile against the PostgreSQL store)")
	return rc, closeFn, err
}

func newRecordsCmd() *cobra.Command {
	var rf recordsFlags
	cmd := &cobra.Command{
		Use:   "records",
		Short: "Read the idempotency records of a running service (get one by tenant and key; stats; uncertain)",
		Long: `Read the idempotency store of a running service, as support staff need it, and print
JSON (records uncertain: a table unless --format json). Nothing is written.

  idemgen records get   the records a tenant's key names: state (completed, running,
                        uncertain, tombstone, expired), operation, fingerprint version,
                        stored status and headers, Location, created, completed and expiry
                        times, until when a tombstone remembers the key, the lease and until
                        when it runs, and the tenant_hash and key_hash that the service's
                        log lines carry
  idemgen records stats counts by state and operation, the oldest running claim, stale
                        claims, uncertain records, tombstones, bytes stored, expired records
                        and tombstones not yet swept (reads every row)
  idemgen records uncertain
                        the lease-mode records whose outcome is uncertain, with their
                        provider keys (a table, or JSON with --format json)

Connect with --dsn, whose scheme names the store: postgres:// or postgresql:// (or a
key=value string) for runtime/pgstore, redis:// or rediss:// for runtime/redisstore's lease
store (add ?prefix=P when the service sets redisstore.Options.Prefix). Prefer $IDEMGEN_DSN,
which does not show in the process list. Exit codes: 0 success (also when no record is found: "found" is false),
2 wrong flags, 3 the store could not be read.`,
		Args: cobra.NoArgs,
	}
	rf.register(cmd)
	cmd.AddCommand(newRecordsGetCmd(&rf), newRecordsStatsCmd(&rf), newRecordsUncertainCmd(&rf))
	return cmd
}

func newRecordsGetCmd(rf *recordsFlags) *cobra.Command {
	var tenant, key, operation, route, path string
	var scopeHeaders []string
	var body, singleTenant bool
	cmd := &cobra.Command{
		Use:   "get (--tenant TENANT | --single-tenant) --key KEY",
		Short: "Print the records of a tenant's idempotency key as JSON",
		Long: `Print the records that an idempotency key names in a tenant, as JSON:

  {"tenant": ..., "key": ..., "found": true, "records": [{"operation": ..., "state": ...}]}

A key is searched tenant-wide (the default scope). A service that runs with
` + "`Config.SingleTenant`" + ` has one tenant, whose scope is empty: pass --single-tenant
instead of --tenant. For an operation declared
` + "`scope: operation`" + ` pass --operation: its per-operation record is searched too, and only
records of that operation are printed. An operation whose scope includes request headers
(Operation.ScopeHeaders, such as Stripe-Account) stores its records under the tenant and
those headers' values: pass each with --scope-header, in the order the operation declares them.
An operation declared ` + "`scope: path`" + ` (the Agentic Commerce Protocol's keys, one per
endpoint path) stores a key under the values of its path parameters: pass --operation, its
path template as the spec writes it (--route) and the path the request was sent to (--path).
The stored body is printed only with --body (base64 in "body", and as text in "body_text" when
it is UTF-8). docs/cli.md shows the output.`,
		Example: `  IDEMGEN_DSN=postgres://support@db/payments idemgen records get --tenant acme --key 6f1c2a9e-0002
  idemgen records get --dsn "$DSN" --tenant acme --key k-123 --operation captureCharge --body
  idemgen records get --dsn "$DSN" --single-tenant --key k-123
  idemgen records get --dsn "$DSN" --tenant tok_1 --key k-123 --operation completeCheckoutSession \
    --route '/checkout_sessions/{checkout_session_id}/complete' --path /checkout_sessions/cs_1/complete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case tenant != "" && singleTenant:
				return &exitError{code: exitUsage, err: errorf("records get takes --tenant or --single-tenant, not both")}
			case (tenant == "" && !singleTenant) || key == "":
				return &exitError{code: exitUsage, err: errorf("records get needs --key and --tenant (or --single-tenant for a service with Config.SingleTenant)")}
			case path != "" && route == "":
				return &exitError{code: exitUsage, err: errorf("records get --path needs --route too (the operation's path template, as the spec writes it)")}
			case route != "" && path == "":
				return &exitError{code: exitUsage, err: errorf("records get --route needs --path too (the path the request was sent to)")}
			case route != "" && operation == "":
				return &exitError{code: exitUsage, err: errorf("records get --route and --path need --operation too (the operation declared scope: path)")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), rf.timeout)
			defer cancel()
			st, closeStore, err := rf.inspector(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			opts := admin.LookupOptions{Operation: operation, Body: body, Path: path}
			if len(scopeHeaders) > 0 || path != "" {
				// The operation as far as the command knows it: its scope headers in the given
				// order; with --operation, its key may be stored per operation or tenant-wide,
				// and with --route and --path under the path's parameter values too.
				op := &runtime.Operation{ID: operation, Path: route, Scope: runtime.ScopeTenant}
				switch {
				case path != "":
					op.Scope = runtime.ScopePath
					if _, ok := op.RecordKeyAt("k", path); !ok {
						return &exitError{code: exitUsage, err: errorf("--path %q does not match --route %q", path, route)}
					}
				case operation != "":
					op.Scope = runtime.ScopeOperation
				}
				opts.ScopeHeaders = http.Header{}
				for _, sh := range scopeHeaders {
					name, value, ok := strings.Cut(sh, ":")
					if !ok || strings.TrimSpace(name) == "" {
						return &exitError{code: exitUsage, err: errorf("--scope-header %q: want NAME: VALUE", sh)}
					}
					name = http.CanonicalHeaderKey(strings.TrimSpace(name))
					op.ScopeHeaders = append(op.ScopeHeaders, name)
					opts.ScopeHeaders.Set(name, strings.TrimSpace(value))
				}
				opts.Operations = []*runtime.Operation{op}
			}
			recs, err := admin.Lookup(ctx, st, tenant, key, opts)
			switch {
			case errors.Is(err, admin.ErrLookupInvalid):
				return &exitError{code: exitUsage, err: err}
			case err != nil:
				return &exitError{code: exitStore, err: err}
			}
			return writeJSON(cmd, struct {
				Tenant  string             `json:"tenant"`
				Key     string             `json:"key"`
				Found   bool               `json:"found"`
				Records []admin.RecordInfo `json:"records"`
			}{tenant, key, len(recs) > 0, recs})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&tenant, "tenant", "", "the `TENANT` (the scope the service's ScopeFunc returns)")
	fl.BoolVar(&singleTenant, "single-tenant", false, "the service runs with Config.SingleTenant: its records have the empty scope")
	fl.StringVar(&key, "key", "", "the idempotency `KEY` as the client sent it")
	fl.StringVar(&operation, "operation", "", "only records of this `OPERATION` ID, including its per-operation key")
	fl.StringArrayVar(&scopeHeaders, "scope-header", nil, "`NAME: VALUE` of a header that is part of the operation's scope (Stripe-Account: acct_1); repeat in the declared order")
	fl.StringVar(&route, "route", "", "the operation's path `TEMPLATE` as the spec writes it (/checkout_sessions/{checkout_session_id}), for --path")
	fl.StringVar(&path, "path", "", "the `PATH` the request was sent to, for an operation declared scope: path (with --operation and --route)")
	fl.BoolVar(&body, "body", false, "print the stored response body too")
	return cmd
}

func newRecordsStatsCmd(rf *recordsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Print counts by state and operation, the oldest running claim, tombstones, bytes stored and expired records not yet swept, as JSON",
		Long: `Print a summary of the idempotency store as JSON: running, completed and stale running
(lease ended) records, the oldest running claim, expired records not yet swept and the oldest
of them, the tombstones that remember keys after their retention ("tombstones") and those past
their horizon not yet swept ("tombstones_not_swept"), bytes of stored responses and of the
tables with their indexes, and the counts per operation. It reads every row: run it against a replica when the table is large.`,
		Example: `  idemgen records stats --dsn "$DSN"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), rf.timeout)
			defer cancel()
			st, closeStore, err := rf.inspector(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			s, err := admin.Stats(ctx, st)
			if err != nil {
				return &exitError{code: exitStore, err: err}
			}
			return writeJSON(cmd, s)
		},
	}
}

func writeJSON(cmd *cobra.Command, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(append(b, '\n'))
	return err
}
