// Package fiberroute is fiber's routing as the fiber adapters (adapters/fiber for fiber v2,
// adapters/fiberv3 for v3) apply it to the spec's path templates: the rules both versions share,
// stated once, without fiber's types, so that idemgen's module does not depend on fiber.
package fiberroute

import (
	"strings"

	"github.com/idemgen/idemgen/runtime/gen"
)

// Config is what of fiber's Config changes how it routes a path.
type Config struct {
	// CaseSensitive: fiber folds letter case unless it is set.
	CaseSensitive bool
	// StrictRouting: fiber ignores a trailing slash unless it is set.
	StrictRouting bool
	// UnescapePath: fiber routes the percent-decoded path when it is set.
	UnescapePath bool
}

// Op is an operation as matching by path sees it.
type Op struct {
	ID, Method string
	Tmpl       gen.Template
}

// NewOp returns the Op of an operation: its ID, method and OpenAPI path template.
func NewOp(id, method, path string) Op {
	return Op{ID: id, Method: method, Tmpl: gen.ParseTemplate(path)}
}

// Match returns the ID of the operation among ops that fiber would route a request of method to
// path to (with prefix, the part of fiber's paths in front of the spec's, removed first), as cfg
// routes it; false when none is.
func Match(ops []Op, method, path, prefix string, cfg Config) (string, bool) {
	path, ok := CutPrefix(path, prefix)
	if !ok {
		return "", false
	}
	if !cfg.StrictRouting && len(path) > 1 {
		path = strings.TrimRight(path, "/")
	}
	segs := gen.SplitPath(path)
	if cfg.UnescapePath {
		segs = gen.DecodeSegments(segs)
	}
	for _, o := range ops {
		if o.Method != method {
			continue
		}
		s := segs
		if !cfg.CaseSensitive {
			s = foldLiterals(o.Tmpl, segs)
		}
		if o.Tmpl.Match(s, false) {
			return o.ID, true
		}
	}
	return "", false
}

// foldLiterals returns segs with each segment at a literal segment of t replaced by t's own
// when they are equal up to letter case: fiber routes case-insensitively by default.
func foldLiterals(t gen.Template, segs []string) []string {
	if len(segs) != t.Len() {
		return segs
	}
	out := segs
	for i, s := range t.Segments() {
		if s.Literal() && s.Pieces[0] != segs[i] && strings.EqualFold(s.Pieces[0], segs[i]) {
			if &out[0] == &segs[0] {
				out = append([]string(nil), segs...)
			}
			out[i] = s.Pieces[0]
		}
	}
	return out
}

// SameShape reports whether a fiber route path and an operation's template have the same
// segments, parameters in either syntax (":id", "{id}") being one, literal segments equal up to
// letter case.
func SameShape(route, template string) bool {
	a, b := gen.SplitPath(route), gen.SplitPath(template)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		pa, pb := strings.ContainsAny(a[i], ":{"), strings.ContainsAny(b[i], ":{")
		if pa != pb || !pa && !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

// CutPrefix removes prefix from path; false when path is not under it (a whole segment).
func CutPrefix(path, prefix string) (string, bool) {
	if prefix == "" {
		return path, true
	}
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok || rest != "" && rest[0] != '/' {
		return "", false
	}
	return rest, true
}
