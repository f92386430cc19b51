package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// config is a decoded idemgen.yaml (docs/cli.md, docs/config.schema.json):
//
//	version: 1
//	defaults: {retention: 48h}          # same fields as x-idempotency
//	only: [createPayment, "POST /v1/ledger/**"]          # mark at most these
//	unsafe: true                        # mark every POST, PUT, PATCH, DELETE
//	refs: {"https://example.com/schemas/": ./schemas/}   # remote $refs read from local copies
//	operations:
//	  createPayment: true               # by operationId
//	  "POST /v1/refunds": {key: {header: X-Request-Id}}   # or METHOD /path
//	  "* /v1/internal/**": false        # or a pattern
//	db: "*example.com/shop/store.DB"    # the handle generated handlers write through
type config struct {
	path     string
	defaults *layer
	entries  []*configEntry
	// db is the Go type reference of the database handle (the generator checks its syntax);
	// dbLoc is where it is written.
	db    string
	dbLoc diag.Loc
	// only, when set, lists the operations that may be marked at all.
	only []*configEntry
	// unsafe marks every operation of an unsafe method not marked otherwise (nil: off).
	unsafe *unsafeSwitch
	// refs maps remote $ref prefixes to local files or folders (absolute paths).
	refs RefMap
}

// unsafeSwitch is the config's unsafe (or stainless) setting.
type unsafeSwitch struct {
	source model.MarkSource // MarkUnsafe or MarkStainless
	layer  *layer
	loc    diag.Loc
}

// configEntry is one operations entry (it marks or, with false, unmarks the operations its
// selector names) or one entry of only.
type configEntry struct {
	selector string // as written
	method   string // set for "METHOD /path" selectors; "*" for any method
	path     string
	// pattern says the selector has wildcards: * (within a path segment or an operationId),
	// ** (any number of segments) and ? (one character); a METHOD of * is any method.
	pattern bool
	marked  bool
	layer   *layer
	loc     diag.Loc // the entry's key in the config file
}

// configFields are the top-level fields of a config file.
var configFields = []string{"version", "defaults", "operations", "only", "unsafe", "stainless", "refs", "db"}

// configFile is a config file's top level, each field kept as its node for located errors.
type configFile struct {
	Version, Defaults, Operations, Only, Unsafe, Stainless, Refs, DB yaml.Node
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
	c.readOnly(&f.Only, d)
	c.readUnsafe(&f.Unsafe, &f.Stainless, d)
	c.readRefs(&f.Refs, d)
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
		e, ok := parseSelector(k.Value, loc, d)
		if !ok {
			continue
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

// parseSelector reads an operation selector: an operationId, "METHOD /path" as written in the
// spec, or either with wildcards (createPayment*, "POST /v1/ledger/**", "* /v1/internal/*").
func parseSelector(raw string, loc diag.Loc, d *diag.List) (*configEntry, bool) {
	e := &configEntry{selector: raw, loc: loc}
	if m, p, ok := strings.Cut(strings.TrimSpace(raw), " "); ok {
		e.method, e.path = strings.ToUpper(m), strings.TrimSpace(p)
		if (e.method != "*" && !isHTTPMethod(e.method)) || !strings.HasPrefix(e.path, "/") {
			d.Errorf(loc, "config-invalid", "%q is neither an operationId nor \"METHOD /path\"", raw)
			return nil, false
		}
	}
	target := raw
	if e.method != "" {
		target = e.path
	}
	e.pattern = e.method == "*" || strings.ContainsAny(target, "*?")
	if e.pattern && !doublestar.ValidatePattern(globOf(target)) {
		d.Errorf(loc, "config-invalid", "%q is not a valid pattern: * matches within a path segment, ** any number of segments, ? one character", raw)
		return nil, false
	}
	return e, true
}

// globOf escapes what doublestar would read as syntax but a path template or an operationId
// holds literally (the braces of {id}, brackets, backslashes), so that only *, ** and ? are
// wildcards.
func globOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '{', '}', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// matches reports whether the entry's selector names the operation.
func (e *configEntry) matches(id, method, path string) bool {
	switch {
	case !e.pattern && e.method == "":
		return e.selector == id
	case !e.pattern:
		return e.method == method && e.path == path
	case e.method == "":
		ok, _ := doublestar.Match(globOf(e.selector), id)
		return ok
	}
	if e.method != "*" && e.method != method {
		return false
	}
	ok, _ := doublestar.Match(globOf(e.path), path)
	return ok
}

// readOnly reads only: a list of selectors, the operations that may be marked.
func (c *config) readOnly(n *yaml.Node, d *diag.List) {
	if n.Kind == 0 {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.Errorf(diag.Loc{File: c.path, Line: n.Line, Column: n.Column, Pointer: "/only"}, "wrong-type",
			"only must be a list of operationIds, \"METHOD /path\" selectors or patterns, not %s", describe(n))
		return
	}
	c.only = []*configEntry{} // set, even when empty: nothing is marked
	for i, v := range n.Content {
		loc := diag.Loc{File: c.path, Line: v.Line, Column: v.Column, Pointer: "/only/" + strconv.Itoa(i)}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			d.Errorf(loc, "wrong-type", "an only entry must be an operationId, \"METHOD /path\" or a pattern, not %s", describe(v))
			continue
		}
		if e, ok := parseSelector(v.Value, loc, d); ok {
			c.only = append(c.only, e)
		}
	}
}

// readUnsafe reads unsafe (true, false, or settings for the operations it marks) and
// stainless, which is Stainless's own setting: {idempotency_header: Idempotency-Key}.
func (c *config) readUnsafe(unsafe, stainless *yaml.Node, d *diag.List) {
	if unsafe.Kind != 0 {
		loc := diag.Loc{File: c.path, Line: unsafe.Line, Column: unsafe.Column, Pointer: "/unsafe"}
		if on, l := decodeMark(unsafe, loc, d); on {
			c.unsafe = &unsafeSwitch{source: model.MarkUnsafe, layer: l, loc: loc}
		}
	}
	if stainless.Kind == 0 {
		return
	}
	loc := diag.Loc{File: c.path, Line: stainless.Line, Column: stainless.Column, Pointer: "/stainless"}
	if stainless.Kind != yaml.MappingNode {
		d.Errorf(loc, "wrong-type", "stainless must be a map with idempotency_header (as in Stainless's config), not %s", describe(stainless))
		return
	}
	var header string
	bad := false
	for i := 0; i+1 < len(stainless.Content); i += 2 {
		k, v := stainless.Content[i], stainless.Content[i+1]
		kloc := diag.Loc{File: c.path, Line: k.Line, Column: k.Column, Pointer: "/stainless/" + escapeToken(k.Value)}
		if k.Value != "idempotency_header" {
			d.Errorf(kloc, "unknown-field", "unknown stainless field %q; idemgen reads idempotency_header", k.Value)
			bad = true
			continue
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || !validToken(v.Value) {
			d.Errorf(kloc, "bad-value", "stainless.idempotency_header must be a header name, not %s", describe(v))
			bad = true
			continue
		}
		header = v.Value
	}
	if header == "" {
		if !bad {
			d.Errorf(loc, "config-invalid", "stainless needs idempotency_header, the header Stainless's SDKs send the key in")
		}
		return
	}
	if c.unsafe != nil {
		d.Errorf(loc, "config-invalid", "stainless and unsafe (line %d) both mark every unsafe operation; keep one", c.unsafe.loc.Line)
		return
	}
	l := &layer{keyHeader: &header, locs: map[string]diag.Loc{"key/header": loc}}
	c.unsafe = &unsafeSwitch{source: model.MarkStainless, layer: l, loc: loc}
}

// readRefs reads refs: remote $ref prefixes mapped to local files or folders, relative to the
// config file.
func (c *config) readRefs(n *yaml.Node, d *diag.List) {
	if n.Kind == 0 {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(diag.Loc{File: c.path, Line: n.Line, Column: n.Column, Pointer: "/refs"}, "wrong-type",
			"refs must be a map from a remote URL (or URL prefix ending in /) to a local file (or folder), not %s", describe(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		loc := diag.Loc{File: c.path, Line: k.Line, Column: k.Column, Pointer: "/refs/" + escapeToken(k.Value)}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			d.Errorf(loc, "wrong-type", "refs %q must name a local file or folder, not %s", k.Value, describe(v))
			continue
		}
		local := v.Value
		if !filepath.IsAbs(local) {
			local = filepath.Join(filepath.Dir(c.path), filepath.FromSlash(local))
		}
		if err := c.refs.Add(k.Value, local); err != nil {
			d.Errorf(loc, "config-invalid", "refs: %v", err)
		}
	}
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
			"the config must be a map with version, defaults, operations, only, unsafe, stainless and refs, not %s", describe(top))
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
		case "only":
			f.Only = *v
		case "unsafe":
			f.Unsafe = *v
		case "stainless":
			f.Stainless = *v
		case "refs":
			f.Refs = *v
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
