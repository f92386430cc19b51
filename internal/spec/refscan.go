package spec

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
)

// The reference scanner runs only after kin-openapi refused a document: kin-openapi stops at the
// first bad $ref and says neither the file nor the line. The scanner re-reads every file reachable
// through $refs and reports each dangling reference, reference to the wrong kind of object and
// remote reference with the file, line and JSON pointer of the $ref itself. It costs a second
// parse, which is why a document that loads never pays for it.

type refScanner struct {
	d        *diag.List
	rootFile string                // the root document (cleaned): overlays apply to it only
	refs     RefMap                // remote targets read from local copies
	root     string                // absolute directory of the root document: references may not leave it
	files    map[string]*yaml.Node // parsed files by cleaned path; nil value = unreadable
	queue    []string
	// repairs lists, per file, the objects holding a reported $ref: replaced by neutral
	// objects, the document can be loaded again so that the later stages still run.
	repairs map[string][]repair
}

// repair is one object to neutralise: the JSON pointer tokens of the object that holds a bad
// $ref.
type repair struct {
	tokens []string
}

// scanRefs reports every bad $ref under root and returns where they are, per file (cleaned
// paths), for repairDocument.
func scanRefs(root string, refs RefMap, d *diag.List) map[string][]repair {
	s := &refScanner{d: d, refs: refs, files: map[string]*yaml.Node{}, repairs: map[string][]repair{}}
	root = filepath.Clean(root)
	s.rootFile = root
	s.root, _ = filepath.Abs(filepath.Dir(root))
	s.file(root)
	for len(s.queue) > 0 {
		f := s.queue[0]
		s.queue = s.queue[1:]
		if n := s.files[f]; n != nil {
			s.walk(f, n, nil)
		}
	}
	return s.repairs
}

// errf reports a bad $ref of file at path (the tokens of the object holding it), with the way
// out, and records the object for repair.
func (s *refScanner) errf(file string, path []string, loc diag.Loc, code, format string, args ...any) {
	s.d.Add(diag.Diagnostic{Severity: diag.Error, Code: code, Loc: loc, Message: fmt.Sprintf(format, args...), Hint: s.wayOut(file, path, "", "remove a broken $ref")})
	s.repairs[file] = append(s.repairs[file], repair{tokens: append([]string(nil), path...)})
}

// wayOut is the hint of a bad $ref: the spec's author fixes the $ref; for a spec the user does
// not own, an OpenAPI Overlay removes the object that holds it (in the root document: overlays
// apply to it only), after which the document loads. what, when set, replaces the first line.
func (s *refScanner) wayOut(file string, path []string, what, title string) string {
	if len(path) == 0 {
		return ""
	}
	if filepath.Clean(file) != s.rootFile {
		return fmt.Sprintf("fix the $ref in %s; an overlay applies to the root document only, so for a spec you do not own, copy %s and fix the copy", file, file)
	}
	if what == "" {
		what = "fix the $ref; for a spec you do not own, remove the object that holds it with an overlay (--overlay FILE)"
	}
	return what + ":\n  overlay: 1.0.0\n  info: {title: " + title + ", version: 1.0.0}\n  actions:\n" +
		"    - target: " + jsonPathOf(s.files[s.rootFile], path) + "\n      remove: true"
}

// jsonPathOf writes the RFC 9535 JSONPath of the node at tokens in root: names as .name or
// ['name'], list indexes as [i].
func jsonPathOf(root *yaml.Node, tokens []string) string {
	var b strings.Builder
	b.WriteString("$")
	n := root
	for _, tok := range tokens {
		if n != nil && n.Kind == yaml.SequenceNode {
			b.WriteString("[" + tok + "]")
		} else if plainName(tok) {
			b.WriteString("." + tok)
		} else {
			b.WriteString("['" + strings.ReplaceAll(strings.ReplaceAll(tok, `\`, `\\`), "'", `\'`) + "']")
		}
		if n != nil {
			n = child(n, tok)
		}
	}
	return b.String()
}

// jsonPathIn is jsonPathOf in a file's content (nil tree: indexes are then written as names).
func jsonPathIn(data []byte, tokens []string) string {
	var doc yaml.Node
	if yaml.Unmarshal(bytes.TrimPrefix(data, bom), &doc) != nil {
		return jsonPathOf(nil, tokens)
	}
	top := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	return jsonPathOf(top, tokens)
}

func plainName(s string) bool {
	for i, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			return false
		}
	}
	return s != ""
}

// file parses path once; an unparsable file is reported with the parser's line.
func (s *refScanner) file(path string) (*yaml.Node, bool) {
	if n, ok := s.files[path]; ok {
		return n, n != nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		s.files[path] = nil
		return nil, false
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(bytes.TrimPrefix(data, bom), &doc); err != nil {
		s.files[path] = nil
		s.d.Add(yamlDiag(path, err))
		return nil, false
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	s.files[path] = root
	s.queue = append(s.queue, path)
	return root, true
}

func (s *refScanner) walk(file string, n *yaml.Node, path []string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if k == "$ref" && v.Kind == yaml.ScalarNode && !underData(path) {
				if m := wholeMap(path); m != "" {
					s.mapRef(file, v, path, m)
					continue
				}
				if len(path) > 1 && path[len(path)-1] == "content" && path[len(path)-2] != "properties" {
					// content maps media type names to Media Type Objects, which OpenAPI 3.0 and
					// 3.1 do not let be references (Lob's spec refers to components/mediaTypes,
					// a section OpenAPI 3.2 introduces).
					s.errf(file, path, diag.Loc{File: file, Line: v.Line, Column: v.Column, Pointer: pointerOf(append(path, "$ref"))}, "ref-not-allowed",
						"$ref %q stands for a whole content map, which OpenAPI 3.0 and 3.1 do not allow (a content map names media types, and a Media Type Object cannot be a reference before OpenAPI 3.2); write the media types inline", v.Value)
					continue
				}
				s.ref(file, v, path)
				continue
			}
			if k == "example" || (strings.HasPrefix(k, "x-") && !namesMap(path)) {
				continue // free-form data, not OpenAPI objects
			}
			s.walk(file, v, append(path, k))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			s.walk(file, c, append(path, strconv.Itoa(i)))
		}
	}
}

// wholeMap names the map of a document's top level a $ref at path would stand for
// (components/schemas, components, paths, Swagger 2.0's definitions), "" when path is no such
// place. None of them may be a reference: a Components Object's maps (and 2.0's definitions,
// parameters, responses) name each component, and a Paths Object names each path.
func wholeMap(path []string) string {
	switch {
	case len(path) == 1 && (path[0] == "components" || path[0] == "paths" || path[0] == "definitions" ||
		path[0] == "parameters" || path[0] == "responses" || path[0] == "securityDefinitions" || path[0] == "webhooks"):
		return path[0]
	case len(path) == 2 && path[0] == "components" && componentKinds[path[1]] != "":
		return path[0] + "/" + path[1]
	}
	return ""
}

// mapRef reports a $ref that stands for a whole map of the top level (Lob-style bundling gone
// wrong: components: {schemas: {$ref: ./schemas.yaml}}): OpenAPI has no such reference, and
// kin-openapi's decoder would only say that a string cannot be a schema. The way out is an
// overlay that removes the map; $refs to its entries then point to nothing and are reported
// too (each with its own way out), until they point into the file the map referred to.
func (s *refScanner) mapRef(file string, v *yaml.Node, path []string, m string) {
	loc := diag.Loc{File: file, Line: v.Line, Column: v.Column, Pointer: pointerOf(append(path, "$ref"))}
	s.d.Add(diag.Diagnostic{Severity: diag.Error, Code: "ref-not-allowed", Loc: loc,
		Message: fmt.Sprintf("$ref %q stands for the whole %s map, which OpenAPI does not allow: the map names each entry itself (OpenAPI 3.0 and 3.1, Components and Paths Objects; Swagger 2.0, Definitions Object); idemgen reads the document without it", v.Value, m),
		Hint: s.wayOut(file, path, fmt.Sprintf("write the map's entries, or a $ref for each (Name: {$ref: '%[1]s#/Name'}); for a spec you do not own, remove the map with an overlay (--overlay FILE), after which $refs to its entries (#/%[2]s/Name) are reported until they name %[1]s#/Name",
			v.Value, m), "remove a $ref that stands for a whole map")})
	s.repairs[file] = append(s.repairs[file], repair{tokens: append([]string(nil), path...)})
}

// namesMap reports whether the mapping at path maps names chosen by the API's author to objects
// (a response's headers, a schema's properties, the components of a section, a media type's
// encoding): there a key that starts with x- is a name (X-Request-Id, x-trace), not an
// extension, and its value is an OpenAPI object whose $refs count. The objects that allow
// extensions beside their names (Paths, Responses of an operation, Callback) are not such maps.
func namesMap(path []string) bool {
	n := len(path)
	if n == 0 {
		return false
	}
	switch last := path[n-1]; last {
	case "headers", "properties", "patternProperties", "$defs", "definitions", "encoding", "links", "examples",
		"securityDefinitions", "variables", "mapping":
		return true
	case "schemas", "requestBodies", "securitySchemes", "pathItems", "callbacks":
		return n >= 2 && path[n-2] == "components"
	case "parameters", "responses":
		// components/parameters, components/responses, and Swagger 2.0's root maps; an
		// operation's parameters are a list, its responses allow extensions.
		return n == 1 || (n >= 2 && path[n-2] == "components")
	}
	return false
}

// remoteDoc is a remote $ref's document: the URL without its fragment.
func remoteDoc(u *url.URL) string {
	c := *u
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// underData reports whether path is inside a schema's properties map keyed "$ref" (a property
// literally named $ref), which is data, not a reference.
func underData(path []string) bool {
	return len(path) > 0 && path[len(path)-1] == "properties"
}

func (s *refScanner) ref(file string, v *yaml.Node, path []string) {
	ref := v.Value
	loc := diag.Loc{File: file, Line: v.Line, Column: v.Column, Pointer: pointerOf(append(path, "$ref"))}
	u, err := url.Parse(ref)
	if err != nil {
		s.errf(file, path, loc, "bad-ref", "$ref %q is not a valid URI reference: %v", ref, err)
		return
	}
	target := file
	mapped := false
	if u.Scheme != "" || u.Host != "" {
		local, ok := s.refs.Local(u)
		if !ok {
			s.errf(file, path, loc, "remote-ref", "$ref %q is remote; idemgen never loads over the network: save a copy and map it with --ref-map %s=FILE (or refs: in idemgen.yaml), or copy it next to the spec and refer to it by a relative path", ref, remoteDoc(u))
			return
		}
		target, mapped = filepath.Clean(filepath.FromSlash(local)), true
		if _, err := os.Stat(target); err != nil {
			s.errf(file, path, loc, "dangling-ref", "$ref %q is mapped to the local copy %s, which does not exist", ref, target)
			return
		}
	}
	if u.Path != "" && !mapped {
		target = filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(u.Path)))
		if abs, err := filepath.Abs(target); err == nil {
			if rel, err := filepath.Rel(s.root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				s.errf(file, path, loc, "ref-outside-root", "$ref %q leaves the spec's directory; idemgen reads only files under the root document's directory (copy the referenced file under it and adjust the $ref, with an overlay for a spec you do not own)", ref)
				return
			}
		}
		if _, err := os.Stat(target); err != nil {
			s.errf(file, path, loc, "dangling-ref", "$ref %q points to file %s, which does not exist", ref, target)
			return
		}
	}
	root, ok := s.file(target)
	if !ok {
		return // reported where the file is
	}
	tokens, err := splitPointer(u.Fragment)
	if err != nil {
		s.errf(file, path, loc, "bad-ref", "$ref %q: %v", ref, err)
		return
	}
	n := root
	for i, tok := range tokens {
		next := child(n, tok)
		if next == nil {
			s.errf(file, path, loc, "dangling-ref", "$ref %q points to nothing: %s has no %q", ref, describeAt(target, tokens[:i]), tok)
			return
		}
		n = next
	}
	want := expectedKind(path)
	got := targetKind(tokens)
	if want != "" && got != "" && want != got {
		s.errf(file, path, loc, "wrong-ref-kind", "$ref %q points into components/%s, which holds %ss, where a %s is expected", ref, tokens[1], got, want)
	}
}

func describeAt(file string, tokens []string) string {
	if len(tokens) == 0 {
		return file
	}
	return file + "#" + pointerOf(tokens)
}

// child follows one JSON pointer token.
func child(n *yaml.Node, tok string) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == tok {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

// componentKinds maps a components section to the kind of object it holds.
var componentKinds = map[string]string{
	"schemas": "schema", "parameters": "parameter", "requestBodies": "request body",
	"responses": "response", "headers": "header", "examples": "example",
	"pathItems": "path item", "securitySchemes": "security scheme", "links": "link",
	"callbacks": "callback",
}

// expectedKind is the kind of object OpenAPI expects where a $ref sits, from the keys above it;
// "" when the position does not say.
func expectedKind(path []string) string {
	n := len(path)
	if n == 0 {
		return ""
	}
	last, prev := path[n-1], ""
	if n >= 2 {
		prev = path[n-2]
	}
	if n >= 3 && path[n-3] == "components" && n == 3 {
		return componentKinds[prev]
	}
	_, lastIsIndex := strconv.Atoi(last)
	switch {
	case prev == "parameters" && lastIsIndex == nil:
		return "parameter"
	case last == "schema" || last == "items" || last == "additionalProperties" || last == "not":
		return "schema"
	case prev == "properties" || prev == "allOf" || prev == "oneOf" || prev == "anyOf":
		return "schema"
	case last == "requestBody":
		return "request body"
	case prev == "responses" && n >= 2:
		return "response"
	}
	return ""
}

// targetKind is the kind of object a pointer lands on, from the components section it is in
// (kin-openapi decodes a component by its section, so a parameter object filed under schemas
// is a schema to it); "" outside components.
func targetKind(tokens []string) string {
	if len(tokens) == 3 && tokens[0] == "components" {
		return componentKinds[tokens[1]]
	}
	return ""
}

// splitPointer splits an RFC 6901 pointer (as found in a URI fragment) into unescaped tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("fragment %q is not a JSON pointer", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// pointerOf joins tokens into an RFC 6901 pointer.
func pointerOf(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
