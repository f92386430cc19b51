package gen

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Nested multipart parts: SDK generators write an object member of a multipart/form-data body
// as one text part per field rather than one JSON part. Stainless's Go SDKs name them
// metadata.order in older releases and metadata[order] in newer ones, as form encoders
// (deepObject, PHP, Stripe) do. groupNested turns the parts of each such member into one part
// holding the same value as JSON, so that the member's JSON decoder reads it.

// nestedNode is one value of an assembled member: a leaf (a part's text) or an object or array
// of children, in the order their first part came.
type nestedNode struct {
	leaf     bool
	text     string
	keys     []string
	children []*nestedNode
	appended bool // an array written with empty segments (tags[]=a&tags[]=b)
}

// child returns the child of n under key, adding it when missing.
func (n *nestedNode) child(key string) *nestedNode {
	if i := slices.Index(n.keys, key); i >= 0 {
		return n.children[i]
	}
	c := &nestedNode{}
	n.keys = append(n.keys, key)
	n.children = append(n.children, c)
	return c
}

// groupNested replaces the nested parts of each member in names (metadata[order],
// accounting.class_id) by one part named after the member, at the place of the first of them,
// whose data is their values assembled as JSON (Multipart documents the rules). A part named
// exactly after the member is left as it is.
func groupNested(parts []part, names []string) ([]part, error) {
	var roots map[string]*nestedNode
	var first map[string]int // the index in out of each member's part
	out := parts[:0:0]
	for _, p := range parts {
		base, segs, ok := nestedName(p.name, names)
		if !ok {
			out = append(out, p)
			continue
		}
		if p.filename != "" || !utf8.Valid(p.data) {
			return nil, partError(p.name, "is a file or not UTF-8 text: a nested field's part is text")
		}
		if roots == nil {
			roots, first = map[string]*nestedNode{}, map[string]int{}
		}
		root, seen := roots[base]
		if !seen {
			root = &nestedNode{}
			roots[base] = root
			first[base] = len(out)
			out = append(out, part{name: base})
		}
		out[first[base]].sent = append(out[first[base]].sent, p)
		if err := root.add(segs, string(p.data)); err != "" {
			return nil, partError(p.name, err)
		}
	}
	for _, base := range names { // in names' order, so that the first error is always the same
		root, ok := roots[base]
		if !ok {
			continue
		}
		b, err := root.appendJSON(nil)
		if err != "" {
			return nil, partError(base, err)
		}
		out[first[base]].data = b
	}
	return out, nil
}

// nestedName splits a part name into the member it belongs to and its segments below it, when
// the member is one of names: base[a][b] (bracketed) or base.a.b (dotted).
func nestedName(name string, names []string) (string, []string, bool) {
	i := strings.IndexAny(name, "[.")
	if i <= 0 || !slices.Contains(names, name[:i]) {
		return "", nil, false
	}
	base, rest := name[:i], name[i:]
	if rest[0] == '.' {
		return base, strings.Split(rest[1:], "."), true
	}
	segs := splitFormName(nil, name)
	if len(segs) < 2 || segs[0] != base {
		return "", nil, false // not base[seg]…: a literal name
	}
	return base, segs[1:], true
}

// add puts text at the path segs below n; reason is why it cannot go there, or "".
func (n *nestedNode) add(segs []string, text string) string {
	for i, seg := range segs {
		if n.leaf {
			return "has nested fields below a field that has a value"
		}
		if seg == "" {
			if i != len(segs)-1 {
				return "has an empty segment ([] or ..) before its last"
			}
			if len(n.keys) > 0 && !n.appended {
				return "appends ([]) to an array written with indices or to an object"
			}
			n.appended = true
			seg = strconv.Itoa(len(n.keys))
		} else if n.appended {
			return "names an element of an array written with []"
		}
		n = n.child(seg)
	}
	if n.leaf {
		return "given more than once"
	}
	if len(n.keys) > 0 {
		return "has a value where other parts have nested fields"
	}
	n.leaf, n.text = true, text
	return ""
}

// appendJSON appends n as JSON: a leaf as a string, children as an array when their keys are
// the indices 0, 1, 2, … (in any order), else as an object.
func (n *nestedNode) appendJSON(b []byte) ([]byte, string) {
	if n.leaf {
		return canonical.AppendString(b, n.text), ""
	}
	order, isArray := n.indices()
	if isArray {
		b = append(b, '[')
		for k, i := range order {
			if k > 0 {
				b = append(b, ',')
			}
			var err string
			if b, err = n.children[i].appendJSON(b); err != "" {
				return nil, err
			}
		}
		return append(b, ']'), ""
	}
	b = append(b, '{')
	for i, key := range n.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = canonical.AppendString(b, key)
		b = append(b, ':')
		var err string
		if b, err = n.children[i].appendJSON(b); err != "" {
			return nil, err
		}
	}
	return append(b, '}'), ""
}

// indices reports whether n's keys are the canonical decimals 0 … len-1, and the order of its
// children by index.
func (n *nestedNode) indices() ([]int, bool) {
	order := make([]int, len(n.keys))
	for i := range order {
		order[i] = -1
	}
	for i, key := range n.keys {
		v, err := strconv.Atoi(key)
		if err != nil || v < 0 || v >= len(n.keys) || strconv.Itoa(v) != key || order[v] >= 0 {
			return nil, false
		}
		order[v] = i
	}
	return order, true
}

// partError is the 400 of a part that cannot be read as a nested field.
func partError(name, reason string) error {
	return &canonical.Error{Pointer: "/" + pointerToken(name), Offset: -1, Reason: "part " + strconv.Quote(name) + " " + reason}
}
