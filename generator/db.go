package generator

import (
	"fmt"
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
)

// DefaultDB is the database handle generated handlers write through when neither Options.DB nor
// the config's db names one: runtime/pgstore's DBTX (Exec, Query, QueryRow, CopyFrom,
// SendBatch: the method set of sqlc's generated DBTX, so sqlc code takes it as is).
const DefaultDB = pkgPgstore + ".DBTX"

// dbAlias is the name of the handle in every generated package: type DBTX = <the handle>, which
// each business function's signature, each handler and Register use.
const dbAlias = "DBTX"

// dbHandle is the Go type generated handlers write through, from a type reference: an import
// path, a dot and an exported type name, with a leading * for a pointer type.
type dbHandle struct {
	ref        string // as written
	ptr        bool
	path, name string
}

// parseDB parses a type reference such as "github.com/idemgen/idemgen/runtime/pgstore.DBTX" or
// "*github.com/idemgen/idemgen/runtime/store/memstore.DB". The type must be exported (the
// generated package is another package) and named by its package's import path.
func parseDB(ref string) (dbHandle, error) {
	h := dbHandle{ref: ref}
	s := strings.TrimPrefix(ref, "*")
	h.ptr = len(s) < len(ref)
	slash := strings.LastIndexByte(s, '/')
	dot := strings.LastIndexByte(s, '.')
	if dot <= slash || dot == len(s)-1 {
		return h, fmt.Errorf("%q is not a Go type named by its import path (import/path.Type, * first for a pointer: %s)", ref, DefaultDB)
	}
	h.path, h.name = s[:dot], s[dot+1:]
	if r, _ := utf8.DecodeRuneInString(h.name); !token.IsIdentifier(h.name) || !unicode.IsUpper(r) {
		return h, fmt.Errorf("%q: %q is not an exported Go type name", ref, h.name)
	}
	if strings.HasPrefix(h.path, "/") || strings.HasSuffix(h.path, "/") || strings.Contains(h.path, "//") ||
		strings.ContainsAny(h.path, " \t\"'`\\*") {
		return h, fmt.Errorf("%q: %q is not an import path", ref, h.path)
	}
	return h, nil
}

// CheckDB reports whether ref names a type that generated code can write through (Options.DB):
// a Go type named by its import path, * first for a pointer.
func CheckDB(ref string) error {
	_, err := parseDB(ref)
	return err
}

// code is the handle's type expression.
func (h dbHandle) code() jen.Code {
	if h.ptr {
		return jen.Op("*").Qual(h.path, h.name)
	}
	return jen.Qual(h.path, h.name)
}

// pgstore reports whether the handle is runtime/pgstore's DBTX.
func (h dbHandle) pgstore() bool { return !h.ptr && h.path == pkgPgstore && h.name == "DBTX" }

// planDB decides the handle: Options.DB, else the config's db, else DefaultDB. A bad
// Options.DB is the caller's error (returned); a bad db in the config is located there.
func (g *planner) planDB() error {
	switch {
	case g.opts.DB != "":
		h, err := parseDB(g.opts.DB)
		if err != nil {
			return fmt.Errorf("generate: db %w", err)
		}
		g.db = h
	case g.doc.DB != "":
		h, err := parseDB(g.doc.DB)
		if err != nil {
			g.diags.Errorf(g.doc.DBLoc, "config-invalid", "db %v", err)
			h, _ = parseDB(DefaultDB) // the rest of the plan still finds its errors
		}
		g.db = h
	default:
		g.db, _ = parseDB(DefaultDB)
	}
	return nil
}
