package conform

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FreshFunc returns a new value for a parameter: a resource a stateful operation consumes (a
// checkout session that complete or cancel closes, an order that capture captures), made for
// the run's tenant (Options.Header). Options.FreshParams names the parameters it serves.
type FreshFunc func(ctx context.Context) (string, error)

// freshValues hands out the values of Options.FreshParams, one per parameter and key: every
// request with a key (its first request, retries, duplicates, faulted copies, the same key's
// other requests) names the same resource, and another key another resource, so each key's
// first execution finds the resource as new. Requests without a key share one value.
type freshValues struct {
	funcs map[string]FreshFunc
	mu    sync.Mutex
	vals  map[[2]string]freshValue
	// effects is the run's oracle (nil without one); made counts the effects the FreshFuncs
	// made (a new session is a row the oracle may count), which the checks' readings leave
	// out. With an oracle the checks run one at a time, so the reading around a call sees
	// its effects only.
	effects Effects
	made    atomic.Int64
}

type freshValue struct {
	v   string
	err error
}

// freshTimeout bounds one FreshFunc call.
const freshTimeout = 30 * time.Second

func newFreshValues(funcs map[string]FreshFunc, effects Effects) *freshValues {
	if len(funcs) == 0 {
		return nil
	}
	return &freshValues{funcs: funcs, vals: map[[2]string]freshValue{}, effects: effects}
}

// serves reports whether name is a fresh parameter.
func (f *freshValues) serves(name string) bool {
	if f == nil {
		return false
	}
	_, ok := f.funcs[name]
	return ok
}

// madeEffects is how many effects the FreshFuncs made so far.
func (f *freshValues) madeEffects() int64 {
	if f == nil {
		return 0
	}
	return f.made.Load()
}

// value is the value of parameter name for key, made on first use; ok is false when name is no
// fresh parameter.
func (f *freshValues) value(name, key string) (v string, ok bool, err error) {
	if f == nil {
		return "", false, nil
	}
	fn, ok := f.funcs[name]
	if !ok {
		return "", false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if have, done := f.vals[[2]string{name, key}]; done {
		return have.v, true, have.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), freshTimeout)
	defer cancel()
	var before int64
	if f.effects != nil {
		if before, err = f.effects(ctx); err != nil {
			return "", true, fmt.Errorf("fresh value of %s: effects oracle: %w", name, err)
		}
	}
	v, err = fn(ctx)
	if f.effects != nil && err == nil {
		after, oerr := f.effects(ctx)
		if oerr != nil {
			return "", true, fmt.Errorf("fresh value of %s: effects oracle: %w", name, oerr)
		}
		f.made.Add(after - before)
	}
	if err == nil && v == "" {
		err = fmt.Errorf("it gave an empty value")
	}
	if err != nil {
		err = fmt.Errorf("fresh value of %s: %w", name, err)
	}
	f.vals[[2]string{name, key}] = freshValue{v, err}
	return v, true, err
}

// FreshCommand is a FreshFunc that runs command with sh -c and takes its standard output,
// trimmed, as the value (`idemgen conform --fresh-param NAME=COMMAND`): a command that creates
// the resource, such as curl piped into jq. Its error names the command and what it printed on
// standard error.
func FreshCommand(command string) FreshFunc {
	return func(ctx context.Context) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return "", fmt.Errorf("--fresh-param command %q: %v: %s", command, err, msg)
			}
			return "", fmt.Errorf("--fresh-param command %q: %v", command, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
}
