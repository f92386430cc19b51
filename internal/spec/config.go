package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
)

// config is a decoded idemgen.yaml (docs/cli.md, docs/config.schema.json):
//
//	version: 1
//	defaults: {retention: 48h}          # same fields as x-idempotency
//	operations:
//	  createPayment: true               # by operationId
//	  "POST /v1/refunds": {key: {header: X-Request-Id}}   # or METHOD /path
//	db: "*example.com/shop/store.DB"    # the handle generated handlers write through
type config struct {
	path     string
	defaults *layer
	entries  []*configEntry
	// db is the Go type reference of the database handle (the generator checks its syntax);
	// dbLoc is where it is written.
	db    string
	dbLoc diag.Loc
}

// configEntry is one operations entry: it marks (or, with false, unmarks) one operation.
type configEntry struct {
	selector string // as written
	method   string // set for "METHOD /path" selectors
	path     string
	marked   bool
	layer    *layer
	loc      diag.Loc // the entry's key in the config file
	used     bool
}

// configFields are the top-level fields of a config file.
var configFields = []string{"version", "defaults", "operations", "db"}

// configFile is a config file's top level, each field kept as its node for located errors.
type configFile struct {
	Version, Defaults, Operations, DB yaml.Node
}

// configVersion is the only config format version this idemgen reads.
const configVersion = 1

// readConfig decodes the config file strictly: unknown fields, wrong types and bad settings are
// located errors in the config file. It returns nil when the file cannot be used at all.
func readConfig(path string, d *diag.List) *config {
	data, err := os.ReadFile(path)
	if err != nil {
		d.Errorf(diag.Loc{File: path}, "read-failed", "cannot read the config: %v", err)
		return nil
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, bom))).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.Errorf(diag.Loc{File: path, Line: 1}, "config-invalid", "the config file is empty; it needs at least `version: 1`")
			return nil
		}
		dg := yamlDiag(path, err)
		dg.Code = "config-invalid"
		d.Add(dg)
		return nil
	}
	f, ok := configTop(path, &doc, d)
	if !ok {
		return nil
	}
	c := &config{path: path}
	if f.Version.Kind == 0 {
		d.Errorf(diag.Loc{File: path, Line: 1}, "config-invalid", "the config file needs `version: %d`", configVersion)
	} else if v := &f.Version; v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		d.Errorf(diag.Loc{File: path, Line: v.Line, Column: v.Column, Pointer: "/version"}, "config-invalid", "version must be the number %d, not %s", configVersion, describe(v))
		return nil
	} else if n, err := strconv.Atoi(v.Value); err != nil || n != configVersion {
		d.Errorf(diag.Loc{File: path, Line: v.Line, Column: v.Column, Pointer: "/version"}, "config-invalid", "config version %s is not supported; this idemgen reads version %d", v.Value, configVersion)
		return nil
	}
	if f.Defaults.Kind != 0 {
		c.defaults = decodeDefaults(&f.Defaults, diag.Loc{File: path, Line: f.Defaults.Line, Pointer: "/defaults"}, d)
	}
	if v := &f.DB; v.Kind != 0 {
		loc := diag.Loc{File: path, Line: v.Line, Column: v.Column, Pointer: "/db"}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || v.Value == "" {
			d.Errorf(loc, "wrong-type", "db must be a Go type as a string (\"github.com/idemgen/idemgen/runtime/pgstore.DBTX\"), not %s", describe(v))
		} else {
			c.db, c.dbLoc = v.Value, loc
		}
	}
	if f.Operations.Kind == 0 {
		return c
	}
	if f.Operations.Kind != yaml.MappingNode {
		d.Errorf(diag.Loc{File: path, Line: f.Operations.Line, Column: f.Operations.Column, Pointer: "/operations"}, "wrong-type",
			"operations must be a map from an operationId or \"METHOD /path\" to true or settings, not %s", describe(&f.Operations))
		return c
	}
	seen := map[string]diag.Loc{}
	for i := 0; i+1 < len(f.Operations.Content); i += 2 {
		k, v := f.Operations.Content[i], f.Operations.Content[i+1]
		ptr := "/operations/" + escapeToken(k.Value)
		loc := diag.Loc{File: path, Line: k.Line, Column: k.Column, Pointer: ptr}
		e := &configEntry{selector: k.Value, loc: loc}
		if m, p, ok := strings.Cut(strings.TrimSpace(k.Value), " "); ok {
			e.method, e.path = strings.ToUpper(m), strings.TrimSpace(p)
			if !isHTTPMethod(e.method) || !strings.HasPrefix(e.path, "/") {
				d.Errorf(loc, "config-invalid", "%q is neither an operationId nor \"METHOD /path\"", k.Value)
				continue
			}
		}
		norm := e.method + " " + e.path
		if e.method == "" {
			norm = k.Value
		}
		if prev, dup := seen[norm]; dup {
			d.Errorf(loc, "config-duplicate", "operation %q is already configured at line %d", k.Value, prev.Line)
			continue
		}
		seen[norm] = loc
		e.marked, e.layer = decodeMark(v, diag.Loc{File: path, Line: v.Line, Column: v.Column, Pointer: ptr}, d)
		c.entries = append(c.entries, e)
	}
	return c
}

// configTop reads the top-level mapping of a config document: every unknown field is a located
// error (with the known field it is closest to), and the file is still read when the rest is
// good, so one run shows every problem. ok is false when the top level is not a mapping.
func configTop(path string, doc *yaml.Node, d *diag.List) (f configFile, ok bool) {
	top := doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		d.Errorf(diag.Loc{File: path, Line: 1}, "config-invalid", "the config file is empty; it needs at least `version: 1`")
		return f, false
	}
	if top.Kind != yaml.MappingNode {
		d.Errorf(diag.Loc{File: path, Line: top.Line, Column: top.Column}, "wrong-type",
			"the config must be a map with version, defaults and operations, not %s", describe(top))
		return f, false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		loc := diag.Loc{File: path, Line: k.Line, Column: k.Column, Pointer: "/" + escapeToken(k.Value)}
		if line, dup := seen[k.Value]; dup {
			d.Errorf(loc, "config-invalid", "%s is already set at line %d", k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "version":
			f.Version = *v
		case "defaults":
			f.Defaults = *v
		case "operations":
			f.Operations = *v
		case "db":
			f.DB = *v
		default:
			if near := closest(k.Value, configFields); near != "" {
				d.Errorf(loc, "unknown-field", "unknown config field %q; did you mean %q?", k.Value, near)
			} else {
				d.Errorf(loc, "unknown-field", "unknown config field %q (known: %s)", k.Value, strings.Join(configFields, ", "))
			}
		}
	}
	return f, true
}

func isHTTPMethod(m string) bool {
	switch m {
	case "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE":
		return true
	}
	return false
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// configHint is the config entry that would mark an operation with the given key settings,
// shown by `idemgen check` next to an unmarked operation.
func configHint(selector, keyField, keyValue string, required *bool) string {
	return "to mark it without editing the spec, add to idemgen.yaml (or run with --infer):\n" + configKeyEntry(selector, keyField, keyValue, required)
}

// configKeyEntry is the idemgen.yaml entry that marks an operation with a key carrier.
func configKeyEntry(selector, keyField, keyValue string, required *bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations:\n  %q:\n    key: {%s: %q", selector, keyField, keyValue)
	if required != nil && !*required {
		b.WriteString(", required: false")
	}
	b.WriteString("}")
	return b.String()
}
