package spec

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	yaml3 "go.yaml.in/yaml/v3"
	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/diag"
)

// locator answers "which line is this JSON pointer on" for the files of a document. kin-openapi
// can record positions itself (Loader.IncludeOrigin), but on Stripe's 4 MB spec that adds about
// 70% to the load. Instead the root document is parsed once into a YAML node tree that both
// kin-openapi decodes from (kinload.go) and the locator reads; referenced files are parsed on
// first use. The trees also give what kin-openapi's maps lose: the order in which a schema writes
// its properties, and the position of every value inside an x-idempotent object.
type locator struct {
	root string // the root file as the user named it
	refs RefMap // remote $refs read from local copies
	// swagger2: the document is Swagger 2.0, read as kin-openapi's conversion to 3.0. Places
	// are walked as 3.0 pointers and translated to the 2.0 file only when located
	// (swagger2loc.go); no node is looked up on the way, so nothing reads a 2.0 value as the
	// 3.0 one a pointer names.
	swagger2 bool

	mu    sync.Mutex
	files map[string]*parsed
	// index maps the keys of large mappings (components/schemas, paths) to their positions, so
	// locating every schema of a big spec is not quadratic. Built on first use; the locator is
	// used by one goroutine at a time after loading.
	index map[*yaml.Node]map[string]int
}

// indexThreshold is the mapping size from which lookups go through an index.
const indexThreshold = 32

// member returns the key and value nodes of key in mapping n.
func (l *locator) member(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if len(n.Content) < 2*indexThreshold {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i], n.Content[i+1]
			}
		}
		return nil, nil
	}
	l.mu.Lock()
	idx, ok := l.index[n]
	if !ok {
		idx = make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if _, dup := idx[n.Content[i].Value]; !dup {
				idx[n.Content[i].Value] = i
			}
		}
		if l.index == nil {
			l.index = map[*yaml.Node]map[string]int{}
		}
		l.index[n] = idx
	}
	l.mu.Unlock()
	if i, ok := idx[key]; ok {
		return n.Content[i], n.Content[i+1]
	}
	return nil, nil
}

type parsed struct {
	done chan struct{}
	node *yaml.Node // the document's top node; nil when the file could not be parsed
}

func newLocator(root string) *locator {
	return &locator{root: root, files: map[string]*parsed{}}
}

// set records the already parsed tree of file (the root document, parsed once for both
// kin-openapi and the locator).
func (l *locator) set(file string, root *yaml.Node) {
	p := &parsed{done: make(chan struct{}), node: root}
	close(p.done)
	l.mu.Lock()
	l.files[l.key(file)] = p
	l.mu.Unlock()
}

func (l *locator) key(file string) string { return filepath.Clean(file) }

func parseNode(data []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return &doc
}

// tree returns file's parsed node tree, reading and parsing a referenced file on first use.
func (l *locator) tree(file string) *yaml.Node {
	if l == nil {
		return nil
	}
	k := l.key(file)
	l.mu.Lock()
	p, ok := l.files[k]
	if !ok {
		p = &parsed{done: make(chan struct{})}
		l.files[k] = p
		l.mu.Unlock()
		if data, err := os.ReadFile(file); err == nil {
			p.node = parseNode(bytes.TrimPrefix(data, bom))
		}
		close(p.done)
	} else {
		l.mu.Unlock()
	}
	<-p.done
	return p.node
}

// lookup follows pointer in file and returns the key node naming the value (nil for the root or
// a sequence item) and the value node; both nil when the pointer leads nowhere.
func (l *locator) lookup(file, pointer string) (key, val *yaml.Node) {
	n := l.tree(file)
	if n == nil {
		return nil, nil
	}
	toks, err := splitPointer(pointer)
	if err != nil {
		return nil, nil
	}
	for _, tok := range toks {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		key = nil
		switch n.Kind {
		case yaml.MappingNode:
			key, n = l.member(n, tok)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil, nil
			}
			n = n.Content[i]
		default:
			return nil, nil
		}
		if n == nil {
			return nil, nil
		}
	}
	return key, n
}

// root is the position of file's top node.
func (l *locator) rootOf(file string) src {
	return src{lc: l, file: file, node: l.tree(file)}
}

// src is a place in a document: a file, the JSON pointer inside it and, when the file has a
// tree, the nodes found there. Stepping down (at) and following a $ref (follow) move through the
// tree one member at a time, so locating the thousands of schemas of a large spec costs a map
// lookup each rather than a walk from the root.
type src struct {
	lc        *locator
	file, ptr string
	key, node *yaml.Node // the key naming the value (nil for a root or a list item) and the value
}

// at steps down through the given member names or list indexes.
func (s src) at(tokens ...string) src {
	for _, t := range tokens {
		s.ptr += "/" + escapeToken(t)
		if s.lc != nil && s.lc.swagger2 {
			s.key, s.node = nil, nil
			continue
		}
		n := s.node
		for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		s.key, s.node = nil, nil
		if n == nil {
			continue
		}
		switch n.Kind {
		case yaml.MappingNode:
			s.key, s.node = s.lc.member(n, t)
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(t); err == nil && i >= 0 && i < len(n.Content) {
				s.node = n.Content[i]
			}
		}
	}
	return s
}

// follow returns where a $ref written at s leads: a fragment-only ref stays in s's file, a
// relative one is resolved against s's directory.
func (s src) follow(ref string) src {
	if ref == "" {
		return s
	}
	path, frag, _ := strings.Cut(ref, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	file := s.file
	if u, err := url.Parse(path); err == nil && u.Scheme != "" && s.lc != nil {
		local, _ := s.lc.refs.Local(u)
		path, file = "", filepath.FromSlash(local) // an unmapped remote file has no tree
	}
	if path != "" {
		file = filepath.Join(filepath.Dir(s.file), filepath.FromSlash(path))
	}
	out := src{lc: s.lc, file: file, ptr: frag}
	if s.lc != nil && !s.lc.swagger2 {
		out.key, out.node = s.lc.lookup(file, frag)
	}
	return out
}

// loc is s as a diagnostic location: the line and column of the key naming the value (or of the
// value when it has no key); just the file and pointer when the document has no positions.
func (s src) loc() diag.Loc {
	if s.lc != nil && s.lc.swagger2 {
		return s.lc.locate2(s.file, s.ptr)
	}
	out := diag.Loc{File: s.file, Pointer: s.ptr}
	switch {
	case s.key != nil:
		out.Line, out.Column = s.key.Line, s.key.Column
	case s.node != nil && s.ptr != "":
		out.Line, out.Column = s.node.Line, s.node.Column
	}
	return out
}

// keys returns the keys of the mapping at s in document order (nil when it is not one).
func (s src) keys() []string {
	n := s.node
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	return out
}

// toYAML3 copies a node tree into the YAML library the settings and config decoders use.
func toYAML3(n *yaml.Node) *yaml3.Node {
	if n == nil {
		return nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	out := &yaml3.Node{Tag: n.Tag, Value: n.Value, Line: n.Line, Column: n.Column}
	switch n.Kind {
	case yaml.DocumentNode:
		out.Kind = yaml3.DocumentNode
	case yaml.SequenceNode:
		out.Kind = yaml3.SequenceNode
	case yaml.MappingNode:
		out.Kind = yaml3.MappingNode
	default:
		out.Kind = yaml3.ScalarNode
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "" {
		out.Tag = n.ShortTag()
	}
	for _, c := range n.Content {
		out.Content = append(out.Content, toYAML3(c))
	}
	return out
}
