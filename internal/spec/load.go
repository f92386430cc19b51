// Package spec loads an OpenAPI document (3.0, 3.1, or Swagger 2.0 converted to 3.0), applies
// OpenAPI Overlay 1.0 documents and an idemgen.yaml config file, validates every idempotency
// setting (docs/design.md section 2) and builds the internal/model IR. It is the only package that
// imports kin-openapi: every other package reads the model.
//
// Spec problems never come back as a Go error: they are located diagnostics in Result.Diags
// (file, line, column, JSON pointer and a stable code). Load returns an error only for problems
// the user must fix outside the documents, such as a file that does not exist.
package spec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// Options says what to load.
type Options struct {
	Path       string   // root spec file
	ConfigPath string   // idemgen.yaml, optional
	Overlays   []string // OpenAPI Overlay 1.0 files, applied in order before reading
	Infer      bool     // --infer
	// RefMap maps remote $refs to local copies (--ref-map); it wins over the config's refs.
	RefMap RefMap
	// Profile, when set, names the contract table row (runtime/defaults.Profiles) every marked
	// operation is under unless the spec or the config names one: its settings apply where
	// neither sets its own (`idemgen conform --profile`: a vendor's spec judged by the vendor's
	// contract). A name that is no row is an error.
	Profile string
}

// Result is a loaded document and everything found wrong or suspicious in it.
type Result struct {
	Doc   *model.Document // nil when the document could not be loaded at all
	Diags *diag.List      // errors and warnings (check warnings included), unsorted
	// OverlayFailed is set when Doc is nil because an overlay could not be applied (the
	// document itself may be fine).
	OverlayFailed bool

	src *loaded // the resolved document Doc was built from, for Annotate
}

// Load reads opts.Path (YAML or JSON, local $refs only), applies overlays and the config file,
// and builds the model. The returned error is non-nil only when an input file cannot be read
// (for example it does not exist); every problem inside a document is a diagnostic in the
// Result, and Result.Doc is nil only when the document could not be parsed or resolved.
func Load(ctx context.Context, opts Options) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{Diags: &diag.List{}}
	for _, p := range append([]string{opts.Path, opts.ConfigPath}, opts.Overlays...) {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("load %s: file does not exist", p)
		case err != nil:
			return nil, fmt.Errorf("load %s: %w", p, err)
		case fi.IsDir():
			return nil, fmt.Errorf("load %s: is a directory, not a file", p)
		}
	}

	if opts.Profile != "" {
		if _, ok := defaults.ProfileNamed(opts.Profile); !ok {
			return nil, fmt.Errorf("profile %q: no such profile (the contract table has %s)", opts.Profile, strings.Join(defaults.ProfileNames(), ", "))
		}
	}
	var cfg *config
	if opts.ConfigPath != "" {
		cfg = readConfig(opts.ConfigPath, res.Diags)
	}

	refs := opts.RefMap
	if cfg != nil {
		refs = cfg.refs.Merge(opts.RefMap)
	}
	doc, overlayFailed := readDocument(ctx, opts.Path, opts.Overlays, refs, res.Diags)
	if doc == nil {
		res.OverlayFailed = overlayFailed
		return res, nil
	}
	res.Doc = safeBuild(doc, cfg, opts, res.Diags)
	res.src = doc
	return res, nil
}

// safeBuild builds the model; a panic (a bug in idemgen, or a document shape nobody foresaw)
// becomes a located error instead of a stack trace in front of the user.
func safeBuild(doc *loaded, cfg *config, opts Options, d *diag.List) (out *model.Document) {
	defer func() {
		if r := recover(); r != nil {
			d.Errorf(diag.Loc{File: opts.Path}, "internal-error", "idemgen failed while reading this document (%v); please report it with the spec", r)
			out = nil
		}
	}()
	return build(doc, cfg, opts, d)
}
