package gen

import (
	"net/url"
	"strings"
)

// This file is the one matcher of OpenAPI path templates: the runtime's HTTP layer finds path
// values with it, the Middleware decides with it which operation a request is to, and generated
// route dispatchers check the literal pieces of mixed segments with MatchSegment. Everything
// matches percent-decoded segments, as http.ServeMux does: "/v1/%70ayments" is "/v1/payments",
// and "a%2Fb" is one segment whose value is "a/b".

// Template is an OpenAPI path template ("/v1/payments/{payment_id}/refunds",
// "/2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json") split into its segments. Its zero value
// is the template of no path. A Template is immutable and safe for concurrent use.
type Template struct {
	segs []Segment
}

// Segment is one segment of a template: literal pieces with a parameter between each two
// ("{Sid}.{Format}" is pieces "", ".", "" around Sid and Format; a literal segment has one piece
// and no parameter).
type Segment struct {
	Pieces []string
	Params []string
}

// Literal reports whether the segment is literal text (no parameter).
func (s Segment) Literal() bool { return len(s.Params) == 0 }

// Whole reports whether the segment is exactly one parameter ("{payment_id}").
func (s Segment) Whole() bool { return len(s.Params) == 1 && s.Pieces[0] == "" && s.Pieces[1] == "" }

// ParseTemplate splits an OpenAPI path template into segments. The leading '/' is not a
// segment; a trailing '/' makes an empty last segment ("/v1/payments/" has three: "v1",
// "payments", ""). A '{' without its '}' is literal text (the spec loader refuses such paths).
func ParseTemplate(path string) Template {
	parts := SplitPath(path)
	t := Template{segs: make([]Segment, len(parts))}
	for i, p := range parts {
		t.segs[i], _ = ParseSegment(p)
	}
	return t
}

// ParseSegment splits one template segment into its literal pieces and parameter names; ok is
// false when its braces do not pair up ("{a", "a}b", "{a{b}}"), and the segment is then one
// literal piece.
func ParseSegment(seg string) (s Segment, ok bool) {
	rest := seg
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return Segment{Pieces: []string{seg}}, false
			}
			s.Pieces = append(s.Pieces, rest)
			return s, true
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 || strings.IndexByte(rest[:open], '}') >= 0 || strings.IndexByte(rest[open+1:open+end], '{') >= 0 {
			return Segment{Pieces: []string{seg}}, false
		}
		s.Pieces = append(s.Pieces, rest[:open])
		s.Params = append(s.Params, rest[open+1:open+end])
		rest = rest[open+end+1:]
	}
}

// SplitPath splits a path (a template, or a request's escaped path) into its segments: the
// leading '/' removed, then split at every '/'. The root "/" and "" are one empty segment.
func SplitPath(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}

// DecodeSegments percent-decodes each segment of an escaped path split by SplitPath, in place,
// as http.ServeMux compares them; a segment that is not valid percent-encoding stays as it is
// (net/http refuses such a request line before a handler runs).
func DecodeSegments(segs []string) []string {
	for i, s := range segs {
		if strings.IndexByte(s, '%') < 0 {
			continue
		}
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	return segs
}

// Segments returns the template's segments (shared: do not modify them).
func (t Template) Segments() []Segment { return t.segs }

// Len returns the number of segments.
func (t Template) Len() int { return len(t.segs) }

// Match reports whether path segments (percent-decoded, or as sent to compare them raw) fit the
// template segment for segment: literal segments equal (case-sensitive), a parameter segment
// split around its literal pieces by MatchSegment. emptyParams lets a whole-segment parameter
// match an empty segment, as chi's router does ("/v1/payments//refunds").
func (t Template) Match(segs []string, emptyParams bool) bool {
	if len(segs) != len(t.segs) {
		return false
	}
	for i, s := range t.segs {
		if !s.match(segs[i], emptyParams) {
			return false
		}
	}
	return true
}

// MatchEnd is Match against the last Len segments of segs, for a path under a prefix that a
// router added or strips.
func (t Template) MatchEnd(segs []string, emptyParams bool) bool {
	if len(segs) < len(t.segs) {
		return false
	}
	return t.Match(segs[len(segs)-len(t.segs):], emptyParams)
}

func (s Segment) match(seg string, emptyParams bool) bool {
	switch {
	case s.Literal():
		return seg == s.Pieces[0]
	case s.Whole():
		return seg != "" || emptyParams
	}
	_, ok := MatchSegment(seg, s.Pieces...)
	return ok
}

// Value returns the value of the parameter name in path segments that end with the template's
// (percent-decoded: DecodeSegments), and whether the template names it and the segment holding
// it fits. The segments are aligned at the end, so a prefix before the template (a router's
// mount point) does not matter.
func (t Template) Value(segs []string, name string) (string, bool) {
	if len(segs) < len(t.segs) {
		return "", false
	}
	segs = segs[len(segs)-len(t.segs):]
	for i, s := range t.segs {
		for j, p := range s.Params {
			if p != name {
				continue
			}
			if s.Whole() {
				return segs[i], true
			}
			vals, ok := MatchSegment(segs[i], s.Pieces...)
			if !ok {
				return "", false
			}
			return vals[j], true
		}
	}
	return "", false
}

// Values returns the values of all the template's parameters, in the order they are written,
// in path segments that end with the template's (percent-decoded: DecodeSegments), and whether
// the segments fit; a template without parameters has none.
func (t Template) Values(segs []string) ([]string, bool) {
	if len(segs) < len(t.segs) {
		return nil, false
	}
	segs = segs[len(segs)-len(t.segs):]
	var out []string
	for i, s := range t.segs {
		switch {
		case s.Literal():
		case s.Whole():
			out = append(out, segs[i])
		default:
			vals, ok := MatchSegment(segs[i], s.Pieces...)
			if !ok {
				return nil, false
			}
			out = append(out, vals...)
		}
	}
	return out, true
}

// SameShape reports whether two templates have the same literal segments and pieces, with
// parameters in the same places whatever their names: a router's pattern ("/v1/payments/{id}")
// routes the operation of the spec's template ("/v1/payments/{payment_id}").
func (t Template) SameShape(o Template) bool {
	if len(t.segs) != len(o.segs) {
		return false
	}
	for i, s := range t.segs {
		os := o.segs[i]
		if len(s.Pieces) != len(os.Pieces) {
			return false
		}
		for j := range s.Pieces {
			if s.Pieces[j] != os.Pieces[j] {
				return false
			}
		}
	}
	return true
}

// EndsWith reports whether t's last segments have o's shape (SameShape): a pattern of a router
// mounted under a prefix ("/api/v1/payments") ends with the operation's template.
func (t Template) EndsWith(o Template) bool {
	if len(t.segs) < len(o.segs) {
		return false
	}
	return Template{segs: t.segs[len(t.segs)-len(o.segs):]}.SameShape(o)
}

// MoreSpecific reports whether t sorts before o when both could match one path: at the first
// segment where one is literal and the other is not, the literal one wins, as in routers.
func (t Template) MoreSpecific(o Template) bool {
	for i := range min(len(t.segs), len(o.segs)) {
		a, b := t.segs[i].Literal(), o.segs[i].Literal()
		if a != b {
			return a
		}
	}
	return false
}

// SegmentMatches reports whether MatchSegment accepts seg.
func SegmentMatches(seg string, pieces ...string) bool {
	_, ok := MatchSegment(seg, pieces...)
	return ok
}

// MatchSegment splits one path segment into parameter values around the literal pieces of its
// template segment (one more piece than there are parameters): seg must start with the first
// piece and end with the last, and each value ends at the first occurrence of the next piece
// after it. ok is false when a piece does not match or a value would be empty (the router then
// answers 404, as http.ServeMux does for a path it does not know). Generated route dispatchers
// call it for mixed segments such as "{Sid}.json", which ServeMux patterns cannot express.
func MatchSegment(seg string, pieces ...string) (vals []string, ok bool) {
	if len(pieces) < 2 {
		return nil, len(pieces) == 1 && seg == pieces[0]
	}
	first, last := pieces[0], pieces[len(pieces)-1]
	if len(seg) <= len(first)+len(last) || !strings.HasPrefix(seg, first) || !strings.HasSuffix(seg, last) {
		return nil, false
	}
	rest := seg[len(first) : len(seg)-len(last)]
	vals = make([]string, 0, len(pieces)-1)
	for _, lit := range pieces[1 : len(pieces)-1] {
		i := strings.Index(rest, lit)
		if i <= 0 {
			return nil, false
		}
		vals = append(vals, rest[:i])
		rest = rest[i+len(lit):]
	}
	if rest == "" {
		return nil, false
	}
	return append(vals, rest), true
}
