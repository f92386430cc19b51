package main

// Exit codes of every idemgen command (documented in `idemgen --help`).
const (
	exitOK    = 0 // success
	exitSpec  = 1 // spec, config, overlay or annotation errors (or --check found stale output)
	exitUsage = 2 // wrong flags or arguments
	exitStore = 3 // records, reconcile: the idempotency store could not be read or written
	// exitDesync: reconcile found a desynchronisation with the provider that no resolution
	// settled (charged_no_record, record_no_charge, amount_mismatch).
	exitDesync = 4
)

// exitError carries an exit code from a command to main. Its message, when not empty, has not
// been printed yet.
type exitError struct {
	code int
	err  error
	// noHint leaves out the pointer to --help after the message (conform's exit 2 is "could
	// not run", not always a usage error).
	noHint bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }
