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

	mu    sync.Mutex
	files map[string]*parsed
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
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					key, next = n.Content[i], n.Content[i+1]
					break
				}
			}
			n = next
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

// loc locates pointer in file: the line and column of the key naming the value (or of the value
// when it has no key), or just the file when the pointer cannot be followed.
func (l *locator) loc(file, pointer string) diag.Loc {
	out := diag.Loc{File: file, Pointer: pointer}
	key, val := l.lookup(file, pointer)
	switch {
	case key != nil:
		out.Line, out.Column = key.Line, key.Column
	case val != nil:
		out.Line, out.Column = val.Line, val.Column
	}
	return out
}

// keys returns the keys of the mapping at pointer in document order (nil when it is not one).
func (l *locator) keys(file, pointer string) []string {
	_, n := l.lookup(file, pointer)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	return out
}

// src is where an object sits: a file and a JSON pointer inside it.
type src struct {
	file, ptr string
}

func (s src) at(tokens ...string) src {
	p := s.ptr
	for _, t := range tokens {
		p += "/" + escapeToken(t)
	}
	return src{s.file, p}
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
	if path != "" {
		file = filepath.Join(filepath.Dir(s.file), filepath.FromSlash(path))
	}
	return src{file, frag}
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
