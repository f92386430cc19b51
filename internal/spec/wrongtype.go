package spec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/diag"
)

// constructMsg is the YAML library's message for a value of the wrong type: "cannot construct
// !!str `1` into float64".
var constructMsg = regexp.MustCompile("cannot construct (!!\\w+) `(.*)` into (\\S+)")

// wrongTypes reports every value of the document whose YAML type does not fit the OpenAPI field
// it is written in (minimum: "1", a string where a number belongs) as a located error naming the
// member, the type it needs and the value found, and removes each such member from tree, so
// that the rest of the document can still be read in the same run. It reports nothing and
// returns false when err is not of that kind, or when a value cannot be found in tree.
func wrongTypes(file string, tree *yaml.Node, err error, d *diag.List) bool {
	var many *yaml.LoadErrors
	var list []*yaml.LoadError
	if errors.As(err, &many) {
		list = many.Errors
	} else if one := (*yaml.LoadError)(nil); errors.As(err, &one) {
		list = []*yaml.LoadError{one}
	}
	type fix struct {
		parent *yaml.Node
		i      int
		d      diag.Diagnostic
	}
	var fixes []fix
	for _, e := range list {
		m := constructMsg.FindStringSubmatch(e.Message)
		if m == nil {
			return false
		}
		parent, i, ptr := findMember(tree, e.Mark.Line, e.Mark.Column, nil)
		if parent == nil {
			return false
		}
		key, val := parent.Content[i], parent.Content[i+1]
		if key.Value == "$ref" {
			return false // a $ref where none may be: the reference scanner says why
		}
		dg := diag.Diagnostic{Severity: diag.Error, Code: "wrong-type",
			Loc:     diag.Loc{File: file, Line: val.Line, Column: val.Column, Pointer: ptr},
			Message: fmt.Sprintf("%s must be %s, not %s; the member is left out so the rest of the document can be read", key.Value, goTypeWords(m[3]), yamlValueWords(m[1], val.Value)),
			Hint:    "fix the value in the spec, or with an overlay (--overlay) for a spec you do not own"}
		if m[1] == "!!str" && val.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && (m[3] != "string") {
			dg.Hint = fmt.Sprintf("write it without quotes (%s: %s), or fix it with an overlay (--overlay) for a spec you do not own", key.Value, val.Value)
		}
		fixes = append(fixes, fix{parent, i, dg})
	}
	if len(fixes) == 0 {
		return false
	}
	// Remove from the last member of each mapping backwards, so earlier indexes stay valid.
	for j := len(fixes) - 1; j >= 0; j-- {
		f := fixes[j]
		d.Add(f.d)
		if f.i+1 < len(f.parent.Content) && f.parent.Content[f.i+1] != nil {
			f.parent.Content = append(f.parent.Content[:f.i], f.parent.Content[f.i+2:]...)
		}
	}
	return true
}

// findMember finds the mapping member whose value is at line and column (any column when it is
// 0), depth first, and returns its mapping, the index of its key and its JSON pointer.
func findMember(n *yaml.Node, line, col int, path []string) (*yaml.Node, int, string) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = append(path, fmt.Sprint(i))
			}
			if m, j, ptr := findMember(c, line, col, p); m != nil {
				return m, j, ptr
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Line == line && (col == 0 || v.Column == col) && v.Kind == yaml.ScalarNode {
				return n, i, pointerOf(append(path, n.Content[i].Value))
			}
			if m, j, ptr := findMember(v, line, col, append(path, n.Content[i].Value)); m != nil {
				return m, j, ptr
			}
		}
	}
	return nil, 0, ""
}

// goTypeWords names, for a user, the Go type the YAML library wanted.
func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "*int") || strings.HasPrefix(t, "*uint"):
		return "an integer"
	case strings.HasPrefix(t, "*float"):
		return "a number"
	case t == "bool" || t == "*bool":
		return "true or false"
	case t == "string" || t == "*string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		return "a mapping"
	}
	return "of type " + t
}

// yamlValueWords names the value found: the string "1", the number 12, true.
func yamlValueWords(tag, value string) string {
	switch tag {
	case "!!str":
		return fmt.Sprintf("the string %q", value)
	case "!!int", "!!float":
		return "the number " + value
	case "!!bool":
		return value
	case "!!null":
		return "null"
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	}
	return fmt.Sprintf("%s %q", tag, value)
}
