// Command idemgen reads an OpenAPI document, finds the operations marked x-idempotent and
// generates Go code that makes their retries safe. `idemgen --help` explains the commands;
// docs/cli.md is the reference.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one idemgen invocation and returns its exit code (exit.go). Tests call it
// in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if msg := ee.Error(); msg != "" {
			fmt.Fprintf(stderr, "idemgen: %s\n", msg)
		}
		if ee.code == exitUsage && !ee.noHint {
			fmt.Fprintln(stderr, "Run 'idemgen --help' for usage.")
		}
		return ee.code
	}
	// Anything cobra itself returns (unknown command, wrong number of arguments) is a usage error.
	fmt.Fprintf(stderr, "idemgen: %v\nRun 'idemgen --help' for usage.\n", err)
	return exitUsage
}
