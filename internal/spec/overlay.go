package spec

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/speakeasy-api/jsonpath/pkg/jsonpath"
	jpconfig "github.com/speakeasy-api/jsonpath/pkg/jsonpath/config"
	"github.com/speakeasy-api/jsonpath/pkg/jsonpath/token"
	"github.com/speakeasy-api/openapi-overlay/pkg/overlay"
	"go.yaml.in/yaml/v4"
	overlayyaml "gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/internal/diag"
)

// applyOverlays applies each OpenAPI Overlay 1.0 file in order to the root document and returns
// the overlaid tree, or nil after reporting why it could not. Nodes of the original document
// keep their lines, so diagnostics still point into the spec as written; nodes an overlay added
// carry no line (their pointer still names them). overlayFailed says that an overlay, not the
// document, was the reason for a nil tree.
//
// The actions are applied one at a time, so that each problem is located at its action in the
// overlay file (line and /actions/N/target) and reported once; every action of an overlay is
// tried, so one run shows all of its problems.
func applyOverlays(path string, data []byte, overlays []string, d *diag.List) (tree *yaml.Node, overlayFailed bool) {
	var root overlayyaml.Node
	if err := overlayyaml.Unmarshal(data, &root); err != nil {
		d.Add(yamlDiag(path, err))
		return nil, false
	}
	original := map[*overlayyaml.Node]bool{}
	var mark func(n *overlayyaml.Node)
	mark = func(n *overlayyaml.Node) {
		original[n] = true
		for _, c := range n.Content {
			mark(c)
		}
	}
	mark(&root)
	for _, op := range overlays {
		ov, err := overlay.Parse(op)
		if err != nil {
			d.Add(yamlDiag(op, err))
			return nil, true
		}
		if err := ov.Validate(); err != nil {
			d.Errorf(diag.Loc{File: op}, "overlay-invalid", "invalid overlay: %s", oneLine(err.Error()))
			return nil, true
		}
		if !applyActions(path, op, ov, &root, d) {
			return nil, true
		}
	}
	return fromOverlayTree(&root, original, map[*overlayyaml.Node]*yaml.Node{}), false
}

// applyActions applies the actions of one overlay to root, reporting each action that cannot
// be applied at its target in the overlay file. It returns false when any could not.
func applyActions(specPath, op string, ov *overlay.Overlay, root *overlayyaml.Node, d *diag.List) bool {
	at := actionLocs(op, len(ov.Actions))
	ok, filterNoted := true, false
	for i, a := range ov.Actions {
		loc := at[i]
		rfcErr := rfc9535Error(a.Target)
		q, err := ov.NewPath(a.Target, nil)
		if err != nil {
			// The target is read as RFC 9535 JSONPath, or (without x-speakeasy-jsonpath:
			// rfc9535) by the library's older dialect, and neither could read it.
			if rfcErr == "" {
				rfcErr = oneLine(err.Error())
			}
			d.Errorf(loc, "overlay-invalid", "target %q is not a valid JSONPath: %s", a.Target, rfcErr)
			ok = false
			continue
		}
		switch {
		case rfcErr != "" && !ov.UsesRFC9535():
			d.Warnf(loc, "overlay-warning", "target %q is not RFC 9535 JSONPath (%s); the overlay library read it with its older JSONPath dialect, "+
				"which it will refuse in a later version: correct the target, and add `x-speakeasy-jsonpath: rfc9535` at the overlay's top level to have targets read as RFC 9535 only",
				a.Target, rfcErr)
		case !filterNoted && !ov.UsesRFC9535() && hasFilter(a.Target):
			filterNoted = true
			d.Warnf(loc, "overlay-warning", "target %q has a filter expression, which the overlay library evaluates with its older, deprecated JSONPath dialect "+
				"unless the overlay's top level sets `x-speakeasy-jsonpath: rfc9535`", a.Target)
		}
		nodes := q.Query(root)
		if len(nodes) == 0 {
			verb := "update"
			if a.Remove {
				verb = "remove"
			}
			d.Errorf(loc, "overlay-failed", "target %q matches nothing in %s, so this action has nothing to %s; correct the path (keys are case-sensitive; a path key is quoted, as in $.paths['/pets'].post)",
				a.Target, specPath, verb)
			ok = false
			continue
		}
		var before [][]byte
		if !a.Remove {
			for _, n := range nodes {
				b, _ := overlayyaml.Marshal(n)
				before = append(before, b)
			}
		}
		one := *ov
		one.Actions = []overlay.Action{a}
		if err := one.ApplyTo(root); err != nil {
			d.Errorf(loc, "overlay-failed", "cannot apply this action: %s", oneLine(err.Error()))
			ok = false
			continue
		}
		if !a.Remove && !a.Update.IsZero() && unchanged(nodes, before) {
			d.Warnf(loc, "overlay-warning", "the update changes nothing: what target %q matches already holds these values", a.Target)
		}
	}
	return ok
}

// unchanged reports whether every node still marshals as it did before.
func unchanged(nodes []*overlayyaml.Node, before [][]byte) bool {
	for i, n := range nodes {
		b, _ := overlayyaml.Marshal(n)
		if !bytes.Equal(b, before[i]) {
			return false
		}
	}
	return true
}

var jsonpathPosition = regexp.MustCompile(`^Error at line \d+, column (\d+): (.*)$`)

// rfc9535Error is why target is not RFC 9535 JSONPath, "" when it is: the parser's first line,
// "unexpected token at column 18" (its other lines redraw the target with a caret).
func rfc9535Error(target string) string {
	_, err := jsonpath.NewPath(target, jpconfig.WithPropertyNameExtension())
	if err == nil {
		return ""
	}
	first, _, _ := bytes.Cut([]byte(err.Error()), []byte("\n"))
	if m := jsonpathPosition.FindSubmatch(first); m != nil {
		return fmt.Sprintf("%s at column %s", m[2], m[1])
	}
	return oneLine(err.Error())
}

// hasFilter reports whether a JSONPath holds a filter expression ($.paths[?(@.x)]).
func hasFilter(target string) bool {
	for _, t := range token.NewTokenizer(target, jpconfig.WithPropertyNameExtension()).Tokenize() {
		if t.Token == token.FILTER {
			return true
		}
	}
	return false
}

// actionLocs locates each action's target in the overlay file (line, column and
// /actions/N/target); an action the file does not show plainly is located at the file.
func actionLocs(op string, n int) []diag.Loc {
	out := make([]diag.Loc, n)
	for i := range out {
		out[i] = diag.Loc{File: op, Pointer: "/actions/" + strconv.Itoa(i) + "/target"}
	}
	data, err := os.ReadFile(op)
	if err != nil {
		return out
	}
	var doc overlayyaml.Node
	if overlayyaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 {
		return out
	}
	actions := member(doc.Content[0], "actions")
	if actions == nil || actions.Kind != overlayyaml.SequenceNode {
		return out
	}
	for i, a := range actions.Content {
		if i >= n {
			break
		}
		if t := member(a, "target"); t != nil {
			out[i].Line, out[i].Column = t.Line, t.Column
		} else {
			out[i].Line, out[i].Column = a.Line, a.Column
		}
	}
	return out
}

// member is the value of key in a mapping node, nil when absent.
func member(m *overlayyaml.Node, key string) *overlayyaml.Node {
	if m.Kind != overlayyaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
