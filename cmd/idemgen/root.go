package main

import (
	"github.com/spf13/cobra"
)

const rootLong = `idemgen makes retries of your HTTP API safe.

Mark the operations that must run at most once per idempotency key in your OpenAPI
document with x-idempotent (or in an idemgen.yaml config file, for specs you do not own),
then let idemgen check the marks and generate Go code that stores each response under its
key and replays it to retries.

Start here:
  idemgen check openapi.yaml            validate every x-idempotent mark; warn about
                                        operations that look like they take a key
  idemgen list openapi.yaml             show the marked operations and their settings
  idemgen list vendor.json --infer      treat declared Idempotency-Key headers (and
                                        similar) as marks, for a vendor spec as is
  idemgen generate openapi.yaml -o DIR  write the Go code
  idemgen records get --tenant T --key K --dsn URL
                                        find a request's record in a running service
  idemgen reconcile --report FILE --dsn URL
                                        match a payment provider's report against the
                                        records, and settle uncertain ones (--resolve)

A minimal mark, on an operation:
  post:
    operationId: createPayment
    x-idempotent: true                  # key in the Idempotency-Key header, all defaults

Exit codes: 0 success, 1 errors in the spec, config or overlays (or warnings under
check --strict), 2 wrong flags, arguments, a missing file or an unreadable report, 3 the
idempotency store could not be read or written (records, reconcile), 4 reconcile found a
desynchronisation with the provider.

Reference: docs/cli.md.`

// newRoot builds the command tree. The generator's commands (generate, docs, sql) are added
// by addGeneratorCommands in generate.go.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "idemgen",
		Short:         "Generate idempotency-key handling for OpenAPI operations marked x-idempotent",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(newListCmd(), newCheckCmd(), newSpecCmd(), newVersionCmd(), newRecordsCmd(), newReconcileCmd(), newConformCmd())
	addGeneratorCommands(root)
	return root
}

// specArg accepts exactly one SPEC argument, as a usage error otherwise.
func specArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return &exitError{code: exitUsage, err: errorf("%s needs exactly one SPEC argument (the root OpenAPI file), got %d", cmd.CommandPath(), len(args))}
	}
	return nil
}
