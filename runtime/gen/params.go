package gen

import "strings"

// Params reads the path, query and header parameters of the request: select a parameter (Path,
// Query, Header, or QueryList / HeaderList and Next for arrays), then convert it (Str, Int64,
// Int32, Float64, Bool, Enum) and check it (Length, Min, Items, Pattern, …). A bad or missing
// value is a *BodyError whose pointer is "/<in>/<name>" and whose reason names the parameter.
// It is a view of the Input: in.Params() costs nothing.
type Params Input

// Params returns the parameter reader of the request.
func (in *Input) Params() *Params { return (*Params)(in) }

func (p *Params) selected(where, name, value string) {
	p.where, p.name, p.cur = where, name, value
}

// Path selects the path parameter name (always present, possibly empty).
func (p *Params) Path(name string) {
	p.selected("path", name, (*Input)(p).PathValue(name))
}

// Query selects the query parameter name and reports whether it is present. Absent is
// "missing" when required; more than one value is "given more than once".
func (p *Params) Query(name string, required bool) bool {
	return p.one("query", name, (*Input)(p).Query()[name], required)
}

// Header selects the header parameter name, like Query.
func (p *Params) Header(name string, required bool) bool {
	return p.one("header", name, p.Request.Header.Values(name), required)
}

func (p *Params) one(where, name string, vs []string, required bool) bool {
	if p.err != nil {
		return false
	}
	p.selected(where, name, "")
	switch {
	case len(vs) == 0:
		if required {
			p.Invalid("missing")
		}
		return false
	case len(vs) > 1:
		p.Invalid("given more than once")
		return false
	}
	p.cur = vs[0]
	return true
}

// QueryList selects the array query parameter name and reports whether it is present (absent is
// "missing" when required); Next then steps through its items. With sep "" (explode: true) each
// value is one item; otherwise each value holds items separated by sep ("," for form, "|" for
// pipeDelimited, " " for spaceDelimited), trimmed of surrounding spaces.
func (p *Params) QueryList(name, sep string, required bool) bool {
	return p.list("query", name, (*Input)(p).Query()[name], sep, required)
}

// HeaderList selects the array header parameter name, whose items are separated by ','.
func (p *Params) HeaderList(name string, required bool) bool {
	return p.list("header", name, p.Request.Header.Values(name), ",", required)
}

func (p *Params) list(where, name string, vs []string, sep string, required bool) bool {
	if p.err != nil {
		return false
	}
	p.selected(where, name, "")
	p.items = p.items[:0]
	if len(vs) == 0 {
		if required {
			p.Invalid("missing")
		}
		return false
	}
	for _, v := range vs {
		if sep == "" {
			p.items = append(p.items, v)
			continue
		}
		for it := range strings.SplitSeq(v, sep) {
			p.items = append(p.items, strings.TrimSpace(it))
		}
	}
	return true
}

// Next makes the next item of the selected array parameter current and reports whether there
// was one; it stops at the first refused item.
func (p *Params) Next() bool {
	if p.err != nil || len(p.items) == 0 {
		return false
	}
	p.cur, p.items = p.items[0], p.items[1:]
	return true
}
