package gen

import "strings"

// Params reads the path, query and header parameters of the request: select a parameter (Path,
// Query, Header, or QueryList / HeaderList and Next for arrays; Present tells an absent optional
// one), then convert it (Str, Int64, Int32, Float64, Bool, Enum) and check it (Length, Min, Items,
// Pattern, …):
//
//	r.Params.StoreID = p.Path("storeId").Int64()
//	if p.Query("limit", false).Present() { … } A bad or missing
//
// value is a *BodyError whose pointer is "/<in>/<name>" and whose reason names the parameter.
// It is a view of the Input: in.Params() costs nothing.
type Params Input

// Params returns the parameter reader of the request.
func (in *Input) Params() *Params { return (*Params)(in) }

func (p *Params) selected(where, name, value string) {
	p.where, p.name, p.cur, p.present = where, name, value, true
}

// Path selects the path parameter name (always present, possibly empty).
//
//go:noinline
func (p *Params) Path(name string) *Params {
	p.selected("path", name, (*Input)(p).PathValue(name))
	return p
}

// Query selects the query parameter name. Absent is "missing" when required; more than one value
// is "given more than once".
//
//go:noinline
func (p *Params) Query(name string, required bool) *Params {
	return p.one("query", name, (*Input)(p).Query()[name], required)
}

// Header selects the header parameter name, like Query.
//
//go:noinline
func (p *Params) Header(name string, required bool) *Params {
	return p.one("header", name, p.Request.Header.Values(name), required)
}

// Present reports whether the selected parameter has a value (and nothing was refused so far).
//
//go:noinline
func (p *Params) Present() bool { return p.present && p.err == nil }

func (p *Params) one(where, name string, vs []string, required bool) *Params {
	p.selected(where, name, "")
	switch {
	case len(vs) == 0:
		p.present = false
		if required {
			p.Invalid("missing")
		}
	case len(vs) > 1:
		p.Invalid("given more than once")
	default:
		p.cur = vs[0]
	}
	return p
}

// QueryList selects the array query parameter name (absent is "missing" when required); Next
// then steps through its items. With sep "" (explode: true) each value is one item; otherwise
// each value holds items separated by sep ("," for form, "|" for pipeDelimited, " " for
// spaceDelimited), trimmed of surrounding spaces.
//
//go:noinline
func (p *Params) QueryList(name, sep string, required bool) *Params {
	return p.list("query", name, (*Input)(p).Query()[name], sep, required)
}

// HeaderList selects the array header parameter name, whose items are separated by ','.
//
//go:noinline
func (p *Params) HeaderList(name string, required bool) *Params {
	return p.list("header", name, p.Request.Header.Values(name), ",", required)
}

func (p *Params) list(where, name string, vs []string, sep string, required bool) *Params {
	p.selected(where, name, "")
	p.items, p.item = p.items[:0], 0
	if len(vs) == 0 {
		p.present = false
		if required {
			p.Invalid("missing")
		}
		return p
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
	return p
}

// Next makes the next item of the selected array parameter current and reports whether there
// was one; it stops at the first refused item.
//
//go:noinline
func (p *Params) Next() bool {
	if p.err != nil || p.item >= len(p.items) {
		return false
	}
	p.cur = p.items[p.item]
	p.item++
	return true
}
