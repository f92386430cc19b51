package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/internal/spec"
)

func newSpecCmd() *cobra.Command {
	var lf loadFlags
	var out, format string
	cmd := &cobra.Command{
		Use:   "spec SPEC",
		Short: "Write the spec as idemgen enforces it, for SDK generators and API docs",
		Long: `Load the spec as generate does and write it back with the contract the generated
server keeps, so that SDK generators and API documentation know it: on every idempotent
operation x-idempotent with its resolved settings, the key header parameter with its rules,
the Idempotent-Replayed header on the responses a replay repeats, the error responses the
runtime answers itself (400, 409 and 503 with Retry-After, 412 for OASIS keys, 413, 415, 422,
429) with the error schema in use (RFC 9457 problem details, or Stripe's envelope under
profile stripe), and other tools' annotations: x-fern-idempotent with the document's
x-fern-idempotency-headers, and x-speakeasy-retries for 409 and 503 with the backoff
docs/client.md recommends. A response code the operation already declares is left as written.

The output marks its operations itself: idemgen list reads the same operations from it
without --infer or a config. $refs are kept as written, so write the output beside the spec
when it refers to other files.`,
		Example: `  idemgen spec openapi.yaml --out openapi.idempotent.yaml
  idemgen spec vendor.json --infer --format json > vendor.idempotent.json`,
		Args: specArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format == "" {
				format = "yaml"
				if strings.HasSuffix(strings.ToLower(out), ".json") {
					format = "json"
				}
			}
			if format != "yaml" && format != "json" {
				return &exitError{code: exitUsage, err: errorf("--format must be yaml or json, not %q", format)}
			}
			res, err := lf.result(cmd, args[0])
			if err != nil {
				return err
			}
			if res.Diags.HasErrors() || res.Doc == nil {
				fmt.Fprintln(cmd.ErrOrStderr(), summary(args[0], res))
				return &exitError{code: exitSpec}
			}
			b, err := spec.Annotate(res, format)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVar(&out, "out", "", "write to `FILE` (default: standard output)")
	cmd.Flags().StringVar(&format, "format", "", "`yaml` or json (default: from --out's extension, else yaml)")
	return cmd
}
