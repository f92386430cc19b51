package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// Exit codes of idemgen conform (its own, for CI: a failed check is not a usage error).
const (
	exitConformFailed = 1 // a check failed
	exitConformCannot = 2 // the run could not be made (bad flags, a bad spec, no service), or checked an operation not at all
)

const conformLong = `Check a running service against the Idempotency-Key contract from outside, over
HTTP, whatever it is written in.

For every operation the spec marks idempotent (x-idempotent, --config, --overlay or
--infer, with the key rules, scope, retention and profile 'idemgen list' shows), conform
builds a valid request from the operation's schemas and runs request sequences that check
the contract: a first request, its replay (status, body bytes, allow-listed headers,
Idempotent-Replayed), the same request spelt otherwise, a changed field (422, or the
profile's answer), missing and malformed keys (400, nothing runs), the key reused on another
operation, concurrent duplicates (one execution), a router's 404 under a key, a server error
(never stored), and another tenant. --faults adds a loopback proxy that resets connections
after the service answered, delays and doubles deliveries, and checks every key's history
for linearizability against the contract's model (porcupine).

Some checks need the service's help and say so when they skip: --fail-header (a test knob
that makes the handler fail after its work), --delay-header (one that makes it slow),
--effects-cmd (a command that counts the business effects, so that "runs nothing" and
"executes once" are checked), --tenant-header (a second tenant's credentials).

The report lists each check as PASS, FAIL (what did not hold, and the smallest exchange
that shows it) or SKIP (what it needs). Run conform against a service of its own: other
traffic would mix with the effects it counts.

A check that cannot run is never a pass. An operation of which no check ran (no key could be
made for its rule, no valid request built, its first request refused and not stored) is
listed as NOT CHECKED, and the run exits 2; --strict makes any SKIP exit 2 too.

Exit codes: 0 every operation was checked and no check failed (skips allowed unless
--strict), 1 a check failed, 2 the run could not be made (bad flags, spec errors, the service
unreachable) or left an operation unchecked (or, with --strict, skipped a check).
Reference: docs/conform.md.`

const conformExample = `  # the petstore of the README, on its default port
  idemgen conform examples/petstore/petstore.yaml --base-url http://127.0.0.1:8080 --header 'api_key: me'

  # credentials for every request, and a second tenant for the isolation check
  idemgen conform openapi.yaml --base-url http://localhost:8080 \
      --header 'Authorization: Bearer sk_test_a' --tenant-header 'Authorization: Bearer sk_test_b'

  # a vendor's spec marked by a config file, under its profile (Stripe's 400 idempotency_error)
  idemgen conform stripe.yaml --config idemgen.yaml --base-url http://127.0.0.1:12111 --header 'Authorization: Bearer sk_test_x'

  # judge the answers in a profile's words (its problem types and codes), whatever the spec names
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --profile idemgen

  # marks from an overlay, or the idempotency headers the spec already declares
  idemgen conform paypal.json --overlay paypal.overlay.yaml --base-url http://127.0.0.1:8080
  idemgen conform vendor.json --infer --base-url http://127.0.0.1:8080

  # a spec whose $refs point to the network, read from local copies
  idemgen conform api.yaml --ref-map https://schemas.example.com/=vendor-schemas/ --base-url http://127.0.0.1:8080

  # the service's test knobs: fail after the work (5xx checks), take 300ms (in-flight duplicates)
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --fail-header 'X-Test-Fail: 500' --delay-header 'X-Test-Delay: 300ms'

  # count effects from outside: executions must equal confirmed calls (the command may take 30s)
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --effects-cmd 'psql -Atc "select count(*) from payments"' --effects-timeout 30s

  # in CI: every check must run (a skip exits 2, as an operation left unchecked always does)
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --strict --fail-header 'X-Test-Fail: 500' --tenant-header 'Authorization: Bearer b'

  # faults through the built-in proxy, a JUnit report for CI and an HTML page with the histories
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --faults --format junit --html conform.html > conform.xml
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --faults --short --format json > conform.json   # a small storm

  # an Agentic Commerce Protocol merchant, judged by ACP's contract from ACP's own document;
  # complete and cancel close the session they are sent to, so each key gets a new one
  idemgen conform openapi.agentic_checkout.yaml --infer --profile acp --base-url http://127.0.0.1:8080 \
      --header 'Authorization: Bearer agent-a' --tenant-header 'Authorization: Bearer agent-b' --param API-Version=2026-04-17 \
      --fresh-param checkout_session_id='./new-session.sh' --faults --fail-header 'X-Test-Fail: 500' --delay-header 'X-Test-Delay: 300ms'

  # values the generator cannot guess: an existing resource, a whole body
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --param petId=1 --body 'placeOrder={"petId":1,"quantity":2}'
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --body createCharge=@charge-form.txt

  # hand-written request sequences (the YAML case format of testdata/cases), with or without a spec
  idemgen conform --base-url http://127.0.0.1:8080 --cases testdata/cases

  # one operation, two checks, bounded: at most 200 requests, 30 s, 8 operations at once
  idemgen conform api.yaml --base-url http://127.0.0.1:8080 --operation createPayment --check replay --check mismatch \
      --max-requests 200 --timeout 30s --request-timeout 5s --concurrency 8 --duplicates 16 --seed 42`

type conformFlags struct {
	lf                                     loadFlags
	baseURL                                string
	headers, tenantHeaders                 []string
	failHeader, delayHeader                []string
	effectsCmd                             string
	params, bodies, freshParams            []string
	casesDir                               string
	faults, short                          bool
	checks, operations                     []string
	format, htmlFile                       string
	concurrency, duplicates, maxRequests   int
	timeout, requestTimeout, effectTimeout time.Duration
	seed                                   uint64
	profile                                string
	strict                                 bool
}

func newConformCmd() *cobra.Command {
	var f conformFlags
	cmd := &cobra.Command{
		Use:     "conform [SPEC] --base-url URL",
		Short:   "Check a running service against the Idempotency-Key contract, from outside",
		Long:    conformLong,
		Example: conformExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return &exitError{code: exitConformCannot, err: errorf("conform takes at most one SPEC argument, got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runConform(cmd, args, &f) },
	}
	f.lf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "the service's `URL` (http://127.0.0.1:8080, or with a path prefix)")
	fl.StringVar(&f.profile, "profile", "", "judge the service by this contract `PROFILE` ("+strings.Join(defaults.ProfileNames(), ", ")+"): its settings (key syntax, scope, body rules) where the spec names no profile, and its problem types, codes and echoed headers; default: the spec's own profile:, else statuses and declared error responses only")
	fl.StringArrayVar(&f.headers, "header", nil, "`NAME: VALUE` sent with every request (credentials); repeat for several")
	fl.StringArrayVar(&f.tenantHeaders, "tenant-header", nil, "`NAME: VALUE` of a second tenant, replacing --header for the tenant-isolation check; repeat for several")
	fl.StringArrayVar(&f.failHeader, "fail-header", nil, "`NAME: VALUE` that makes the service fail with a 5xx after doing its work (a test knob), for the 5xx checks")
	fl.StringArrayVar(&f.delayHeader, "delay-header", nil, "`NAME: VALUE` that makes the handler slow (a test knob), so concurrent duplicates meet it in flight")
	fl.StringVar(&f.effectsCmd, "effects-cmd", "", "`COMMAND` (run with sh -c) printing the service's effect count: an integer, or a JSON object whose numbers are summed")
	fl.DurationVar(&f.effectTimeout, "effects-timeout", 10*time.Second, "how long --effects-cmd may take")
	fl.StringArrayVar(&f.params, "param", nil, "`NAME=VALUE` for a path, query or header parameter of that name, instead of a generated value; repeatable")
	fl.StringArrayVar(&f.freshParams, "fresh-param", nil, "`NAME=COMMAND`: a new value of that parameter for each key, printed by COMMAND (run with sh -c), for a resource a stateful operation consumes (a checkout session that complete closes); repeatable")
	fl.StringArrayVar(&f.bodies, "body", nil, "`OPERATION=BODY` request body for an operationId (JSON, or a form a=1&b=2; @FILE reads a file); repeatable")
	fl.StringVar(&f.casesDir, "cases", "", "`DIR` of request-sequence cases (the YAML format of testdata/cases) to run too")
	fl.BoolVar(&f.faults, "faults", false, "run the fault checks through a loopback proxy (resets after the answer, delays, doubled deliveries) and check every key's history")
	fl.BoolVar(&f.short, "short", false, "fewer keys and rounds in the fault checks (for CI)")
	fl.BoolVar(&f.strict, "strict", false, "a skipped check fails the run too (exit 2): every check must run, with every knob it needs")
	fl.StringArrayVar(&f.checks, "check", nil, "run only this `CHECK` (see docs/conform.md for the names); repeatable")
	fl.StringArrayVar(&f.operations, "operation", nil, "check only this `OPERATION` (operationId); repeatable")
	fl.StringVar(&f.format, "format", "text", "report `FORMAT`: text, json or junit, on standard output")
	fl.StringVar(&f.htmlFile, "html", "", "also write the report as an HTML `FILE`, each faulted key's history drawn as a timeline")
	fl.IntVar(&f.concurrency, "concurrency", 0, "operations checked at once (`N`); default 4, 1 with --effects-cmd")
	fl.IntVar(&f.duplicates, "duplicates", 8, "copies concurrent-duplicates sends at once (`N`)")
	fl.IntVar(&f.maxRequests, "max-requests", 20000, "stop sending after `N` requests (the checks after skip)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "bound of the whole run (the checks after skip)")
	fl.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "bound of one request")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the generated requests and keys (0: random; the report prints it)")
	return cmd
}

func runConform(cmd *cobra.Command, args []string, f *conformFlags) error {
	cannot := func(format string, a ...any) error {
		return &exitError{code: exitConformCannot, err: errorf(format, a...), noHint: true}
	}
	if f.baseURL == "" {
		return cannot("conform needs --base-url, the URL of the running service")
	}
	if f.format != "text" && f.format != "json" && f.format != "junit" {
		return cannot("--format must be text, json or junit, not %q", f.format)
	}
	if len(args) == 0 && f.casesDir == "" {
		return cannot("conform needs a SPEC (the operations to check), or --cases DIR")
	}
	if f.profile != "" {
		if _, ok := defaults.ProfileNamed(f.profile); !ok {
			return cannot("--profile %q: no such profile (the contract table has %s)", f.profile, strings.Join(defaults.ProfileNames(), ", "))
		}
	}
	o := conform.Options{BaseURL: f.baseURL, Profile: f.profile, CasesDir: f.casesDir, Faults: f.faults, Short: f.short,
		Concurrency: f.concurrency, Duplicates: f.duplicates, MaxRequests: f.maxRequests, Timeout: f.timeout,
		RequestTimeout: f.requestTimeout, Seed: f.seed, Operations: f.operations, Visualize: f.htmlFile != ""}
	var err error
	if o.Header, err = parseHeaders("--header", f.headers); err != nil {
		return cannot("%v", err)
	}
	for _, h := range []struct {
		flag string
		in   []string
		out  *http.Header
	}{{"--tenant-header", f.tenantHeaders, &o.TenantHeader}, {"--fail-header", f.failHeader, &o.FailHeader}, {"--delay-header", f.delayHeader, &o.DelayHeader}} {
		if len(h.in) == 0 {
			continue
		}
		if *h.out, err = parseHeaders(h.flag, h.in); err != nil {
			return cannot("%v", err)
		}
	}
	if f.effectsCmd != "" {
		o.Effects = conform.EffectsCommand(f.effectsCmd, f.effectTimeout)
		if _, err := o.Effects(cmd.Context()); err != nil {
			return cannot("%v", err)
		}
	}
	if o.Params, err = parseParams(f.params); err != nil {
		return cannot("%v", err)
	}
	if o.Bodies, err = parseBodies(f.bodies); err != nil {
		return cannot("%v", err)
	}
	for _, fp := range f.freshParams {
		name, command, ok := strings.Cut(fp, "=")
		if !ok || name == "" || strings.TrimSpace(command) == "" {
			return cannot("--fresh-param %q: want NAME=COMMAND", fp)
		}
		if o.FreshParams == nil {
			o.FreshParams = map[string]conform.FreshFunc{}
		}
		o.FreshParams[name] = conform.FreshCommand(command)
	}
	known := map[conform.Check]bool{}
	for _, c := range conform.Catalog() {
		known[c.Check] = true
	}
	for _, c := range f.checks {
		if !known[conform.Check(c)] {
			return cannot("--check %q: no such check (docs/conform.md lists them)", c)
		}
		o.Checks = append(o.Checks, conform.Check(c))
	}
	doc := &model.Document{Source: "(no spec)"}
	if len(args) == 1 {
		// The row's settings (key syntax, scope, body rules) apply where the spec sets none,
		// so that a vendor's own spec is judged by the vendor's contract.
		f.lf.profile = f.profile
		res, err := f.lf.result(cmd, args[0])
		if err != nil {
			return &exitError{code: exitConformCannot, err: err}
		}
		if res.Diags.HasErrors() || res.Doc == nil {
			fmt.Fprintln(cmd.ErrOrStderr(), summary(args[0], res))
			return &exitError{code: exitConformCannot}
		}
		doc = res.Doc
		if len(doc.Operations) == 0 && f.casesDir == "" {
			fmt.Fprintln(cmd.ErrOrStderr(), noOperationsHint(args[0], doc, f.lf.infer))
			return &exitError{code: exitConformCannot}
		}
		for _, id := range f.operations {
			if !hasOperation(doc, id) {
				return cannot("--operation %q: %s marks no such operation (idemgen list %s shows them)", id, args[0], args[0])
			}
		}
		for id := range o.Bodies {
			if !hasOperation(doc, id) {
				return cannot("--body %s=…: %s marks no such operation", id, args[0])
			}
		}
	}
	if isTerminal(cmd.ErrOrStderr()) {
		o.Progress = cmd.ErrOrStderr()
	}
	rep, err := conform.Run(cmd.Context(), doc, o)
	if err != nil {
		return &exitError{code: exitConformCannot, err: err, noHint: true}
	}
	w := cmd.OutOrStdout()
	switch f.format {
	case "json":
		err = conform.WriteJSON(w, rep)
	case "junit":
		err = conform.WriteJUnit(w, rep)
	default:
		err = conform.WriteText(w, rep)
	}
	if err != nil {
		return &exitError{code: exitConformCannot, err: err}
	}
	if f.htmlFile != "" {
		if err := writeHTMLFile(f.htmlFile, rep); err != nil {
			return &exitError{code: exitConformCannot, err: err, noHint: true}
		}
	}
	switch _, _, skipped := rep.Counts(); {
	case rep.Failed():
		return &exitError{code: exitConformFailed}
	case rep.Incomplete():
		return &exitError{code: exitConformCannot}
	case f.strict && skipped > 0:
		fmt.Fprintf(cmd.ErrOrStderr(), "idemgen conform: --strict: %d check(s) skipped\n", skipped)
		return &exitError{code: exitConformCannot}
	}
	return nil
}

func hasOperation(doc *model.Document, id string) bool {
	for _, op := range doc.Operations {
		if op.ID == id {
			return true
		}
	}
	return false
}

func writeHTMLFile(path string, rep *conform.Report) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := conform.WriteHTML(out, rep); err != nil {
		out.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return out.Close()
}

// parseHeaders reads "Name: value" flags.
func parseHeaders(flag string, lines []string) (http.Header, error) {
	h := http.Header{}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%s %q: want NAME: VALUE, such as 'Authorization: Bearer sk_test_123'", flag, l)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}

func parseParams(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range in {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--param %q: want NAME=VALUE, such as petId=1", p)
		}
		out[name] = value
	}
	return out, nil
}

func parseBodies(in []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, b := range in {
		op, body, ok := strings.Cut(b, "=")
		if !ok || op == "" {
			return nil, fmt.Errorf("--body %q: want OPERATION=BODY or OPERATION=@FILE, such as 'createPayment={\"amount\":100}'", b)
		}
		if file, isFile := strings.CutPrefix(body, "@"); isFile {
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("--body %s: %w", op, err)
			}
			body = string(data)
		}
		out[op] = []byte(body)
	}
	return out, nil
}

// isTerminal reports whether w is a terminal (progress is printed there, not into a log).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
