package gen

import (
	"encoding/base64"
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

// nestedNode is one value of an assembled member: a leaf (a part's text, or a file part) or an
// object or array of children, in the order their first part came.
type nestedNode struct {
	leaf     bool
	text     string
	file     *part // a file part (a filename): documents[0][file]
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
		if p.filename == "" && !utf8.Valid(p.data) {
			return nil, partError(p.name, "is not UTF-8 text and has no filename: a nested field's part is text, or a file with a filename")
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
		var file *part
		if p.filename != "" {
			file = &out[first[base]].sent[len(out[first[base]].sent)-1]
		}
		if err := root.add(segs, string(p.data), file); err != "" {
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

// add puts text (or file) at the path segs below n; reason is why it cannot go there, or "".
//
// An empty segment appends: tags[] adds an element. Before the last segment
// (documents[][file], as Stainless's SDKs write an array of objects) it names the array's last
// element, or a new one when that element already has the rest of the path (Rack's rule for
// a[][x]): documents[][kind], documents[][file], documents[][kind] are two elements.
func (n *nestedNode) add(segs []string, text string, file *part) string {
	for i, seg := range segs {
		if n.leaf {
			return "has nested fields below a field that has a value"
		}
		if seg == "" {
			if len(n.keys) > 0 && !n.appended {
				return "appends ([]) to an array written with indices or to an object"
			}
			n.appended = true
			if i != len(segs)-1 && len(n.children) > 0 && !n.children[len(n.children)-1].has(segs[i+1:]) {
				n = n.children[len(n.children)-1] // the rest goes into the last element
				continue
			}
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
	n.leaf, n.text, n.file = true, text, file
	return ""
}

// has reports whether a value is set at segs below n, or on the way there (a path that would
// meet a leaf): adding there needs a new element.
func (n *nestedNode) has(segs []string) bool {
	for _, seg := range segs {
		if n.leaf {
			return true
		}
		i := slices.Index(n.keys, seg)
		if i < 0 || seg == "" {
			return false
		}
		n = n.children[i]
	}
	return n.leaf || len(n.keys) > 0
}

// appendJSON appends n as JSON: a leaf as a string, children as an array when their keys are
// the indices 0, 1, 2, … (in any order), else as an object.
func (n *nestedNode) appendJSON(b []byte) ([]byte, string) {
	if n.leaf && n.file != nil {
		return appendFileValue(b, n.file), ""
	}
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

// fileMember is the one member of the JSON object a file part of a nested member is assembled as
// (FileValue reads it); its value holds the part's content type, filename and bytes (base64).
const fileMember = "$file"

// appendFileValue appends the assembled form of a file part.
func appendFileValue(b []byte, p *part) []byte {
	b = append(b, `{"`+fileMember+`":{"content_type":`...)
	b = canonical.AppendString(b, p.contentType)
	b = append(b, `,"data":"`...)
	b = base64.StdEncoding.AppendEncode(b, p.data)
	b = append(b, `","filename":`...)
	b = canonical.AppendString(b, p.filename)
	return append(b, "}}"...)
}

// FileValue reads, in the value of a multipart body's nested member, a file part sent as one of
// its nested fields (documents[0][file], or documents[][file] as Stainless's SDKs write it): the
// generated decoder of an object member with a file property (string, format binary) calls it
// for that property. Multipart assembles such a part as {"$file": {…}} (its content type,
// filename and bytes); anything else there is refused (400): a file travels as a file part,
// never as JSON text.
func FileValue(d *canonical.Decoder) File {
	const notAFile = "is a file: send it as a file part of its own (a part with a filename, such as documents[0][file]), not as JSON"
	raw := d.Raw() // canonical: {"$file":{"content_type":…,"data":…,"filename":…}}
	if d.Failed() {
		return File{}
	}
	var f File
	var in canonical.Decoder
	in.Reset(raw)
	file := false
	for in.BeginObject(); in.NextMember(); {
		if in.Key() != fileMember || file {
			in.Invalid(notAFile)
			break
		}
		file = true
		for in.BeginObject(); in.NextMember(); {
			switch in.Key() {
			case "content_type":
				f.ContentType = in.Str()
			case "filename":
				f.Filename = in.Str()
			case "data":
				data, err := base64.StdEncoding.DecodeString(in.Str())
				if err != nil {
					in.Invalid(notAFile)
				}
				f.Data = data
			default:
				in.Invalid(notAFile)
			}
		}
		in.EndObject()
	}
	in.EndObject()
	if in.Finish() != nil || !file {
		d.Invalid(notAFile)
		return File{}
	}
	return f
}

// partError is the 400 of a part that cannot be read as a nested field.
func partError(name, reason string) error {
	return &canonical.Error{Pointer: "/" + pointerToken(name), Offset: -1, Reason: "part " + strconv.Quote(name) + " " + reason}
}
