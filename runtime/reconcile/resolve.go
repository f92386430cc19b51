package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgen/idemgen/runtime/store"
)

// ResolveOptions configures Resolve.
type ResolveOptions struct {
	// Operator is who confirmed the resolutions, and Reason why (a ticket, "daily report of
	// 2026-11-02"); both go to the audit trail. Operator is required.
	Operator, Reason string
	// Response builds the response a completed record stores and replays to a late retry,
	// from the finding (its report line is the provider's outcome). Default:
	// ReportResponse(200).
	Response func(Finding) (store.Response, error)
}

// ReportResponse returns the default Response: status, Content-Type application/json, and the
// provider's report line as a JSON object (Line.JSON).
func ReportResponse(status int) func(Finding) (store.Response, error) {
	return func(f Finding) (store.Response, error) {
		if f.Line == nil {
			return store.Response{}, errors.New("the finding has no report line to build a response from")
		}
		return store.Response{Status: status, Header: []byte(`{"Content-Type":["application/json"]}`), Body: f.Line.JSON()}, nil
	}
}

// Resolution is what Resolve did with one finding: Err is nil when it was written (Done says
// whether a record was, or only the call log), store.ErrLost (wrapped) when the record moved on
// since it was read (a retry or another resolution came first), or another error.
type Resolution struct {
	Finding Finding
	Action  Action
	Done    store.Resolved
	Err     error
}

// Resolve writes the resolutions of findings (Result.Resolvable; a finding whose Action is
// NoAction is skipped), one store transaction each, and returns what happened to each. It goes
// on after a finding's failure; the error returned is nil, or the first error other than
// store.ErrLost (the store failing), after which it stops. Every resolution is re-checked by
// the store: a record that changed since Run read it is left alone.
func Resolve(ctx context.Context, dst store.Reconcilable, findings []Finding, opts ResolveOptions) ([]Resolution, error) {
	if opts.Operator == "" {
		return nil, errors.New("reconcile: resolutions need an operator (who confirmed them) for the audit trail")
	}
	build := opts.Response
	if build == nil {
		build = ReportResponse(200)
	}
	var out []Resolution
	for _, f := range findings {
		if f.Action == NoAction || f.Call == nil {
			continue
		}
		r := store.Resolution{ProviderKey: f.ProviderKey, Token: f.Call.Token, Complete: f.Action == Complete,
			Class: string(f.Class), Operator: opts.Operator, Reason: opts.Reason}
		if f.Call.Record.State == store.Running {
			r.Token = f.Call.Record.Token
		}
		if f.Line != nil {
			r.Report = f.Line.JSON()
		}
		res := Resolution{Finding: f, Action: f.Action}
		if r.Complete {
			resp, err := build(f)
			if err != nil {
				res.Err = fmt.Errorf("build the response: %w", err)
				out = append(out, res)
				continue
			}
			r.Response = resp
		}
		res.Done, res.Err = dst.Resolve(ctx, r)
		out = append(out, res)
		if res.Err != nil && !errors.Is(res.Err, store.ErrLost) {
			return out, fmt.Errorf("reconcile: %w", res.Err)
		}
	}
	return out, nil
}
