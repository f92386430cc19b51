package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgen/idemgen/internal/history"
)

// The history of a run and its model live in internal/history, which `idemgen conform` shares;
// the scenarios use them under these names.
type (
	Kind         = history.Kind
	Attempt      = history.Attempt
	History      = history.History
	ModelOptions = history.ModelOptions
	Verdict      = history.Verdict
)

const (
	KindOK          = history.KindOK
	KindReplay      = history.KindReplay
	KindConflict    = history.KindConflict
	KindMismatch    = history.KindMismatch
	KindUnavailable = history.KindUnavailable
	KindUnknown     = history.KindUnknown
	KindFailed      = history.KindFailed
	KindOther       = history.KindOther
)

// NewHistory starts a history now.
func NewHistory() *History { return history.NewHistory() }

// Check checks the attempts for linearizability against the contract's model within timeout.
// When the history is not linearizable (or the check timed out), it writes porcupine's
// visualization under a new temporary directory named after name and returns its path in the
// verdict.
func Check(name string, attempts []Attempt, opts ModelOptions, timeout time.Duration) (Verdict, error) {
	v, info := history.Check(attempts, opts, timeout)
	if v.Result == porcupine.Ok {
		return v, nil
	}
	dir, err := os.MkdirTemp("", "idemgen-faults-")
	if err != nil {
		return v, err
	}
	v.Visualization = filepath.Join(dir, sanitize(name)+".html")
	f, err := os.Create(v.Visualization)
	if err != nil {
		return v, err
	}
	if err := history.Visualize(f, opts, info); err != nil {
		f.Close()
		return v, err
	}
	if err := f.Close(); err != nil {
		return v, fmt.Errorf("write %s: %w", v.Visualization, err)
	}
	return v, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
