package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
)

// loadFlags are the flags of every command that reads a spec (list, check, generate).
type loadFlags struct {
	config   string
	overlays []string
	infer    bool
	refMap   []string
	// profile is spec.Options.Profile: the row every marked operation is under unless the
	// spec names one (conform --profile sets it; it is no flag of the other commands).
	profile string
}

// register adds --config, --overlay (repeatable) and --infer to cmd.
func (f *loadFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "idemgen.yaml `FILE` that marks operations without editing the spec (docs/cli.md)")
	fl.StringArrayVar(&f.overlays, "overlay", nil, "OpenAPI Overlay 1.0 `FILE` applied to the spec before reading; repeat to apply several in order")
	fl.BoolVar(&f.infer, "infer", false, "count operations that declare an Idempotency-Key-like header or body field as marked, with the key rules the spec declares")
	fl.StringArrayVar(&f.refMap, "ref-map", nil, "read a remote $ref from a local copy: `URL=FILE`, or a URL prefix ending in / = FOLDER; repeatable (idemgen never loads over the network)")
}

// load reads specPath with the flags' config, overlays and --infer, prints every diagnostic
// (sorted) to cmd.ErrOrStderr(), and returns the document. When the spec has errors it also
// prints the summary line (summary) to standard error and returns an *exitError with exitSpec;
// when a file cannot be read, exitUsage.
func (f *loadFlags) load(cmd *cobra.Command, specPath string) (*model.Document, error) {
	res, err := f.result(cmd, specPath)
	if err != nil {
		return nil, err
	}
	if res.Diags.HasErrors() || res.Doc == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), summary(specPath, res))
		return nil, &exitError{code: exitSpec}
	}
	return res.Doc, nil
}

// summary is the one-line verdict check prints, and list and generate print when they fail:
// "openapi.yaml: 3 idempotent operations, 1 error, 0 warnings". The operations are those the
// run understood as marked; a document that could not be read at all, or not overlaid, says so
// instead of claiming it has none.
func summary(specPath string, res *spec.Result) string {
	errs, warns := tally(res.Diags)
	what := "the document could not be read"
	switch {
	case res.OverlayFailed:
		what = "an overlay could not be applied"
	case res.Doc != nil:
		what = count(len(res.Doc.Operations), "idempotent operation")
	}
	return fmt.Sprintf("%s: %s, %s, %s", specPath, what, count(errs, "error"), count(warns, "warning"))
}

// result loads and prints diagnostics, leaving the verdict to the caller (check --strict).
func (f *loadFlags) result(cmd *cobra.Command, specPath string) (*spec.Result, error) {
	refs, err := spec.ParseRefMap(f.refMap)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	res, err := spec.Load(cmd.Context(), spec.Options{Path: specPath, ConfigPath: f.config, Overlays: f.overlays, Infer: f.infer, RefMap: refs, Profile: f.profile})
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	generationDiags(res)
	printDiags(cmd.ErrOrStderr(), res.Diags)
	return res, nil
}

// generationDiags runs the generator's pure Generate on the loaded document (generator.Diagnose)
// and adds its located errors to res.Diags, discarding the files, so that check and list give
// the same verdict as generate (docs/cli.md), in one run even when the loader found errors.
func generationDiags(res *spec.Result) {
	generator.Diagnose(res.Doc, res.Diags)
}

// printDiags writes every diagnostic, sorted, one per line (hints indented below).
func printDiags(w io.Writer, l *diag.List) {
	for _, d := range l.Sorted() {
		fmt.Fprintln(w, d.String())
	}
}

func errorf(format string, args ...any) error { return errors.New(fmt.Sprintf(format, args...)) }

// noOperationsHint is what check and list print when a document they read has no idempotent
// operation: how to mark some. Under --infer it says that nothing was recognised, and for
// Stripe's spec, which declares no key, how the Stripe profile marks its operations.
func noOperationsHint(specPath string, doc *model.Document, infer bool) string {
	if !infer {
		return fmt.Sprintf("no idempotent operations in %s: mark them with x-idempotent, --config, or try --infer", specPath)
	}
	msg := fmt.Sprintf("no idempotent operations in %s: no operation declares a recognised idempotency key header or body field "+
		"(docs/cli.md, What --infer and check recognise); mark operations with x-idempotent, or list them in an idemgen.yaml (--config)", specPath)
	if strings.Contains(strings.ToLower(doc.Title), "stripe") {
		msg += "\n    Stripe's spec does not declare its Idempotency-Key header; the Stripe profile serves Stripe's contract (README.md, profile):\n" +
			"      version: 1\n      defaults: {profile: stripe}\n      operations:\n        PostCustomers: true   # each operation to guard, by operationId"
	}
	return msg
}
