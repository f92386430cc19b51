package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/internal/diag"
)

func newCheckCmd() *cobra.Command {
	var lf loadFlags
	var strict bool
	cmd := &cobra.Command{
		Use:   "check SPEC",
		Short: "Validate x-idempotent marks and warn about operations that look idempotent but are not marked",
		Long: `Load the spec the way generate does and report every problem, sorted, with its file,
line and JSON pointer: unknown or mistyped x-idempotent fields, bad durations and sizes,
fingerprint.exclude pointers that match nothing, key.body pointers that are not string
properties, marks on safe methods (GET, HEAD, OPTIONS, TRACE), broken $refs.

It also warns about operations that declare an idempotency-looking header (Idempotency-Key,
X-Idempotency-Key, PayPal-Request-Id, Idempotency, *-Idempotency-Key, X-Idempotence-UUID,
Repeatability-Request-ID) or body/form field (idempotency_key, idempotencyKey,
IdempotencyKey; an AIP-155 request_id described as a retry key) without being marked, showing
the idemgen.yaml entry that would mark them, about other spellings of "idempot", and about
request media types fingerprinted as raw bytes.

Every problem is reported in one run: a loader error does not stop the generator's checks,
and a $ref that cannot be followed is set aside so the rest of the document is still read.
The summary line counts the operations understood, the errors and the warnings.

Exit status 1 when there are errors, or warnings under --strict.`,
		Example: `  idemgen check openapi.yaml
  idemgen check openapi.yaml --strict          # fail on warnings too (for CI)
  idemgen check vendor.yaml --config idemgen.yaml`,
		Args: specArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := lf.result(cmd, args[0])
			if err != nil {
				return err
			}
			errs, warns := tally(res.Diags)
			if res.Doc != nil && len(res.Doc.Operations) == 0 && errs == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), noOperationsHint(args[0], res.Doc, lf.infer))
			}
			fmt.Fprintln(cmd.OutOrStdout(), summary(args[0], res))
			if errs > 0 || res.Doc == nil || (strict && warns > 0) {
				return &exitError{code: exitSpec}
			}
			return nil
		},
	}
	lf.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings as errors (exit status 1)")
	return cmd
}

func tally(l *diag.List) (errs, warns int) {
	for _, d := range l.Sorted() {
		if d.Severity == diag.Error {
			errs++
		} else {
			warns++
		}
	}
	return errs, warns
}

// count writes "1 warning", "2 warnings".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
