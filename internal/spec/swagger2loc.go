package spec

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/diag"
)

// Positions in a Swagger 2.0 document. The builder reads the document kin-openapi converted to
// OpenAPI 3.0, so every place it names is a 3.0 JSON pointer (requestBody, components/schemas,
// responses/…/content). The user's file is the 2.0 one: v2Pointer translates such a pointer to
// the place in the 2.0 file that the converter made it from, so that every diagnostic of a
// Swagger 2.0 document carries the line, column and JSON pointer of what the user wrote, as a
// 3.x document's do. The translation follows openapi2conv: an operation's parameters lose their
// body and formData members (which become requestBody), definitions become components/schemas,
// global body parameters components/requestBodies, a response's schema moves under content.

// locate2 is the location in the 2.0 file of the 3.0 pointer ptr: the 2.0 pointer, and the line
// and column of the key naming its value (of the value when it has none; of the nearest place
// above it that the file holds when the converter made it up, such as a default response).
func (l *locator) locate2(file, ptr string) diag.Loc {
	p2 := l.v2Pointer(file, ptr)
	out := diag.Loc{File: file, Pointer: p2}
	toks, err := splitPointer(p2)
	if err != nil {
		return out
	}
	for n := len(toks); n >= 0; n-- {
		key, val := l.lookup(file, pointerOf(toks[:n]))
		switch {
		case key != nil:
			out.Line, out.Column = key.Line, key.Column
		case val != nil && n > 0:
			out.Line, out.Column = val.Line, val.Column
		default:
			continue
		}
		return out
	}
	return out
}

// v2Pointer is the 2.0 pointer of the 3.0 pointer ptr in file (whose tree the locator holds).
// A pointer it cannot place is returned as far as it could be translated.
func (l *locator) v2Pointer(file, ptr string) string {
	toks, err := splitPointer(ptr)
	if err != nil || len(toks) == 0 {
		return ptr
	}
	root := l.tree(file)
	switch {
	case toks[0] == "components" && len(toks) >= 3:
		rest := toks[3:]
		switch toks[1] {
		case "schemas":
			if sub(sub(root, "definitions"), toks[2]) == nil {
				// A formData parameter filed under parameters became a schema.
				return pointerOf(append([]string{"parameters", toks[2]}, rest...))
			}
			return pointerOf(append([]string{"definitions", toks[2]}, rest...))
		case "parameters":
			return pointerOf(append([]string{"parameters", toks[2]}, rest...))
		case "requestBodies":
			return pointerOf(append([]string{"parameters", toks[2]}, bodyRest(rest)...))
		case "responses":
			return pointerOf(append([]string{"responses", toks[2]}, responseRest(rest)...))
		case "securitySchemes":
			return pointerOf(append([]string{"securityDefinitions", toks[2]}, rest...))
		}
		return ptr
	case toks[0] == "paths" && len(toks) >= 3:
		path := toks[:2]
		pathItem := sub(sub(root, "paths"), toks[1])
		if toks[2] == "parameters" && len(toks) >= 4 {
			return pointerOf(append(append(path, "parameters"), l.v2Param(file, pathItem, nil, toks[3], toks[4:])...))
		}
		if len(toks) < 4 {
			return ptr
		}
		op := append(path, toks[2])
		opNode := sub(pathItem, toks[2])
		switch toks[3] {
		case "parameters":
			if len(toks) >= 5 {
				return pointerOf(append(append(op, "parameters"), l.v2Param(file, pathItem, opNode, toks[4], toks[5:])...))
			}
		case "requestBody":
			return l.v2Body(file, path, pathItem, op, opNode, toks[4:])
		case "responses":
			if len(toks) >= 5 {
				return pointerOf(append(append(op, "responses", toks[4]), responseRest(toks[5:])...))
			}
		}
		return ptr
	}
	return ptr
}

// sub follows one token in a tree of the locator's YAML library; nil when there is nothing.
func sub(n *yaml.Node, tok string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil
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

// bodyRest translates what follows a request body (content/{mt}/schema/…) to what follows the
// body parameter (schema/…).
func bodyRest(rest []string) []string {
	if len(rest) >= 3 && rest[0] == "content" && rest[2] == "schema" {
		return append([]string{"schema"}, rest[3:]...)
	}
	if len(rest) >= 1 && rest[0] == "content" {
		return nil
	}
	return rest
}

// responseRest translates what follows a response: content/{mt}/schema/… is schema/…; a
// header's schema is the 2.0 header itself.
func responseRest(rest []string) []string {
	switch {
	case len(rest) >= 3 && rest[0] == "content" && rest[2] == "schema":
		return append([]string{"schema"}, rest[3:]...)
	case len(rest) >= 1 && rest[0] == "content":
		return nil
	case len(rest) >= 3 && rest[0] == "headers" && rest[2] == "schema":
		return append(rest[:2:2], rest[3:]...)
	}
	return rest
}

// v2Param maps the index of a converted parameter (the i-th that is neither body nor formData)
// to its index in the 2.0 list of the operation (or of the path item when opNode is nil). What
// follows the parameter is kept, but a 3.0 parameter's schema is the 2.0 parameter itself.
func (l *locator) v2Param(file string, pathItem, opNode *yaml.Node, index string, rest []string) []string {
	list := sub(opNode, "parameters")
	if opNode == nil {
		list = sub(pathItem, "parameters")
	}
	want, err := strconv.Atoi(index)
	if list == nil || list.Kind != yaml.SequenceNode || err != nil {
		return append([]string{index}, rest...)
	}
	if len(rest) > 0 && rest[0] == "schema" {
		rest = rest[1:] // a 2.0 non-body parameter carries its type itself
	}
	n := 0
	for i, p := range list.Content {
		if in := l.paramIn(file, p); in == "body" || in == "formData" {
			continue
		}
		if n == want {
			return append([]string{strconv.Itoa(i)}, rest...)
		}
		n++
	}
	return append([]string{index}, rest...)
}

// paramIn is the in of a 2.0 parameter, following a local $ref (#/parameters/X).
func (l *locator) paramIn(file string, p *yaml.Node) string {
	if p == nil || p.Kind != yaml.MappingNode {
		return ""
	}
	if ref := sub(p, "$ref"); ref != nil {
		if name, ok := strings.CutPrefix(ref.Value, "#/parameters/"); ok {
			return scalar(sub(sub(sub(l.tree(file), "parameters"), name), "in"))
		}
		return ""
	}
	return scalar(sub(p, "in"))
}

func scalar(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

// v2Body maps a pointer below an operation's requestBody to the body parameter (of the
// operation, else the path item's), or, for a form, to the formData parameter a property names.
func (l *locator) v2Body(file string, path []string, pathItem *yaml.Node, op []string, opNode *yaml.Node, rest []string) string {
	find := func(owner *yaml.Node, in, name string) int {
		list := sub(owner, "parameters")
		if list == nil || list.Kind != yaml.SequenceNode {
			return -1
		}
		for i, p := range list.Content {
			if l.paramIn(file, p) == in && (name == "" || scalar(sub(p, "name")) == name) {
				return i
			}
		}
		return -1
	}
	at := func(owner []string, i int, more ...string) string {
		return pointerOf(append(append(append([]string{}, owner...), "parameters", strconv.Itoa(i)), more...))
	}
	// A form: schema/properties/{name}/… is the formData parameter named so.
	if len(rest) >= 5 && rest[0] == "content" && rest[2] == "schema" && rest[3] == "properties" {
		name := rest[4]
		if i := find(opNode, "formData", name); i >= 0 {
			return at(op, i, rest[5:]...)
		}
		if i := find(pathItem, "formData", name); i >= 0 {
			return at(path, i, rest[5:]...)
		}
	}
	if i := find(opNode, "body", ""); i >= 0 {
		return at(op, i, bodyRest(rest)...)
	}
	if i := find(pathItem, "body", ""); i >= 0 {
		return at(path, i, bodyRest(rest)...)
	}
	for _, in := range []string{"formData"} {
		if i := find(opNode, in, ""); i >= 0 {
			return at(op, i)
		}
		if i := find(pathItem, in, ""); i >= 0 {
			return at(path, i)
		}
	}
	return pointerOf(op)
}
