package generator

import (
	"errors"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Diagnose plans the generation of doc, as Generate does, and adds the errors planning reports
// (unsupported-schema, unsupported-exclusion, bad-path, route-conflict, ...) to diags, so that
// `idemgen check` and `idemgen list` give generate's verdict in the same run as the loader's own
// diagnostics. It emits no file: every error Generate can report for a spec is found by
// planning.
//
// It runs even when diags already holds errors: the loader keeps the model consistent after an
// error (an invalid setting falls back to its default), so the errors of every stage show in
// one run. A loader warning at the very place where the generator reports an error (a media
// type fingerprinted as raw bytes that the generator then refuses beside a typed one) is
// dropped: the error supersedes it.
func Diagnose(doc *model.Document, diags *diag.List) {
	if doc == nil {
		return
	}
	_, err := newPlan(doc, Options{Package: "api"}) // the package name changes no verdict
	var de *diag.Errors
	switch {
	case err == nil:
		return
	case errors.As(err, &de):
	default:
		diags.Errorf(diag.Loc{File: doc.Source}, "internal-error", "%v", err)
		return
	}
	errAt := map[diag.Loc]bool{}
	for _, d := range de.List {
		if d.Severity == diag.Error {
			errAt[d.Loc] = true
		}
	}
	diags.Filter(func(d diag.Diagnostic) bool { return d.Severity == diag.Error || !errAt[d.Loc] })
	for _, d := range de.List {
		diags.Add(d)
	}
}
