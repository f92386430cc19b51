package gen

import (
	"slices"
	"strings"
)

// A deepObject query parameter (OpenAPI style: deepObject, explode: true) is sent as bracketed
// keys, one per member: filter[status]=open&filter[created][gte]=1700000000. DeepObject selects
// the keys of one parameter; the generated code then steps through its members in key order
// (NextMember) and switches on each member's path (Member: the brackets' contents joined by
// "][", "created][gte"), converting and checking the value with the usual readers (Once, then
// Str, Int64, …; Values and Next for an array, whose key is repeated or ends in "[]"), MapKey for
// the keys of a map, Undeclared for a key the schema does not declare, and Required after the
// loop. Errors name the key as sent: `query parameter "filter[created][gte]": must be an
// integer (int64)`, at "/query/filter[created][gte]".

// deepEntry is one member of a deepObject parameter: its path and the values of its keys.
type deepEntry struct {
	path   string
	key    string // the key as sent, for messages (the first one, when name[x] and name[x][] merge)
	values []string
}

// DeepObject selects the deepObject query parameter name: every query key that starts with
// name followed by a bracket. Absent is "missing" when required. A key name without brackets,
// or with malformed brackets (name[a, name[a]b, name[][a]), is refused.
//
//go:noinline
func (p *Params) DeepObject(name string, required bool) *Params {
	p.selected("query", name, "")
	p.deepName = name
	clear(p.deep)
	p.deep, p.deepNext = p.deep[:0], 0
	q := (*Input)(p).Query()
	keys := make([]string, 0, 4)
	for k := range q {
		if k == name || strings.HasPrefix(k, name+"[") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		path, ok := deepPath(k[len(name):])
		if !ok {
			p.name = k
			p.Invalid("is not a deepObject key (" + name + "[member]=value, or " + name + "[member][member]=value)")
			return p
		}
		if i := slices.IndexFunc(p.deep, func(e deepEntry) bool { return e.path == path }); i >= 0 {
			p.deep[i].values = append(p.deep[i].values, q[k]...)
			continue
		}
		p.deep = append(p.deep, deepEntry{path: path, key: k, values: slices.Clone(q[k])})
	}
	slices.SortFunc(p.deep, func(a, b deepEntry) int { return strings.Compare(a.path, b.path) })
	if len(p.deep) == 0 {
		p.present = false
		if required {
			p.Invalid("missing")
		}
	}
	return p
}

// deepPath parses the brackets after a deepObject parameter's name: "[a][b]" is "a][b"; a
// trailing "[]" (an array's items) is dropped. Segments are not empty and hold no bracket.
func deepPath(brackets string) (string, bool) {
	brackets = strings.TrimSuffix(brackets, "[]")
	if len(brackets) < 3 || brackets[0] != '[' || brackets[len(brackets)-1] != ']' {
		return "", false
	}
	path := brackets[1 : len(brackets)-1]
	for seg := range strings.SplitSeq(path, "][") {
		if seg == "" || strings.ContainsAny(seg, "[]") {
			return "", false
		}
	}
	return path, true
}

// NextMember makes the next member of the selected deepObject current and reports whether there
// was one; it stops at the first refused value.
//
//go:noinline
func (p *Params) NextMember() bool {
	if p.err != nil || p.deepNext >= len(p.deep) {
		return false
	}
	e := &p.deep[p.deepNext]
	p.deepNext++
	p.name, p.cur, p.present = e.key, "", true
	return true
}

// Member is the current member's path: "status", "created][gte".
//
//go:noinline
func (p *Params) Member() string { return p.deep[p.deepNext-1].path }

// Once makes the current member's value current for a scalar: a key given more than once is
// refused.
//
//go:noinline
func (p *Params) Once() *Params {
	e := &p.deep[p.deepNext-1]
	if len(e.values) > 1 {
		p.Invalid("given more than once")
	}
	p.cur = e.values[0]
	return p
}

// Values selects the values of the current member as the items of an array; Next steps through
// them.
//
//go:noinline
func (p *Params) Values() *Params {
	e := &p.deep[p.deepNext-1]
	p.items = append(p.items[:0], e.values...)
	p.item = 0
	return p
}

// MapKey reports whether the current member is an entry of the map at path prefix ("" for the
// parameter itself, "metadata" for filter[metadata][k]) and returns its key.
//
//go:noinline
func (p *Params) MapKey(prefix string) (string, bool) {
	path := p.deep[p.deepNext-1].path
	if prefix != "" {
		if !strings.HasPrefix(path, prefix+"][") {
			return "", false
		}
		path = path[len(prefix)+2:]
	}
	if strings.Contains(path, "][") {
		return "", false
	}
	return path, true
}

// Undeclared refuses the current member: its schema does not declare it, and a deepObject
// parameter is strict (its fingerprint is the canonical form of the decoded value).
//
//go:noinline
func (p *Params) Undeclared() { p.Invalid("member not allowed by the schema") }

// Required checks, after the members were read, that each of names is a member of the object
// at path prefix ("" for the parameter, "created][" for filter[created]): some key names it or
// a member inside it.
//
//go:noinline
func (p *Params) Required(prefix string, names ...string) {
	for _, n := range names {
		full := prefix + n
		if slices.IndexFunc(p.deep, func(e deepEntry) bool {
			return e.path == full || strings.HasPrefix(e.path, full+"][")
		}) < 0 {
			p.name = p.deepName + "[" + full + "]"
			p.Invalid("missing")
			return
		}
	}
}

// deepState is the deepObject being read (DeepObject).
type deepState struct {
	deepName string
	deep     []deepEntry
	deepNext int
}
