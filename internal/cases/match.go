package cases

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"mime"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"
)

// checkSingle returns every way resp falls short of e; earlier holds the responses of the
// steps before it (nil for parallel steps), for same_as.
func checkSingle(e *Expect, resp *Response, earlier []*Response) []string {
	var out []string
	if e.Status != 0 && resp.Status != e.Status {
		out = append(out, fmt.Sprintf("status: want %d, got %d", e.Status, resp.Status))
	}
	if e.HasSameAs {
		prev := earlier[e.SameAs]
		if prev.Status != resp.Status {
			out = append(out, fmt.Sprintf("same_as %d: status %d, step %d had %d", e.SameAs, resp.Status, e.SameAs, prev.Status))
		}
		if !bytes.Equal(prev.Body, resp.Body) {
			out = append(out, fmt.Sprintf("same_as %d: body differs from step %d's %s", e.SameAs, e.SameAs, quoteBody(prev.Body)))
		}
	}
	out = append(out, checkShown(e, resp)...)
	return out
}

// checkShown checks what any one response can show: headers, body subset and problem.
func checkShown(e *Expect, resp *Response) []string {
	var out []string
	for _, h := range e.Headers {
		if msg := checkHeader(h, resp.Header); msg != "" {
			out = append(out, msg)
		}
	}
	if e.HasBody {
		got, err := decodeJSON(resp.Body)
		if err != nil {
			out = append(out, fmt.Sprintf("body: want JSON containing %s, got no JSON (%v)", showValue(e.Body), err))
		} else if path, why := subset(e.Body, got, ""); why != "" {
			out = append(out, fmt.Sprintf("body%s: %s", path, why))
		}
	}
	if e.Problem != "" {
		if msg := checkProblem(e.Problem, resp); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

func checkHeader(h HeaderExpect, got http.Header) string {
	values := got.Values(h.Name)
	switch {
	case h.Present:
		if len(values) == 0 {
			return fmt.Sprintf("header %s: want present, got absent", h.Name)
		}
	case h.Absent:
		if len(values) > 0 {
			return fmt.Sprintf("header %s: want absent, got %q", h.Name, strings.Join(values, ", "))
		}
	default:
		if len(values) == 0 {
			return fmt.Sprintf("header %s: want %q, got absent", h.Name, h.Value)
		}
		// Several lines of one field are one comma-separated value (RFC 9110 section 5.3).
		v := strings.Join(values, ", ")
		if strings.EqualFold(h.Name, "Content-Type") {
			if mediaType(v) != mediaType(h.Value) {
				return fmt.Sprintf("header Content-Type: want media type %q, got %q", mediaType(h.Value), v)
			}
		} else if v != h.Value {
			return fmt.Sprintf("header %s: want %q, got %q", h.Name, h.Value, v)
		}
	}
	return ""
}

// mediaType is a Content-Type value's media type, lower case, without parameters.
func mediaType(v string) string {
	if mt, _, err := mime.ParseMediaType(v); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// checkProblem requires an RFC 9457 problem document whose type URI ends with name (at a
// boundary: ".../payload-mismatch" matches payload-mismatch, ".../xpayload-mismatch" does not).
func checkProblem(name string, resp *Response) string {
	ct := resp.Header.Get("Content-Type")
	if mediaType(ct) != "application/problem+json" {
		return fmt.Sprintf("problem %s: want Content-Type application/problem+json, got %q", name, ct)
	}
	var doc struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return fmt.Sprintf("problem %s: body is not a JSON object: %v", name, err)
	}
	if doc.Type == nil {
		return fmt.Sprintf("problem %s: the problem has no type member", name)
	}
	t := *doc.Type
	if !strings.HasSuffix(t, name) {
		return fmt.Sprintf("problem: want type ending in %q, got %q", name, t)
	}
	if rest := t[:len(t)-len(name)]; rest != "" {
		c := rest[len(rest)-1]
		if c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			return fmt.Sprintf("problem: want type ending in %q, got %q", name, t)
		}
	}
	return ""
}

// checkParallel checks the responses of a parallel step: the statuses table, then what each
// class and every response must show.
func checkParallel(e *Expect, resps []*Response) []string {
	var out []string
	if len(e.Statuses) > 0 {
		out = append(out, checkCounts(e.Statuses, resps)...)
	}
	if e.Status != 0 {
		for i, r := range resps {
			if r.Status != e.Status {
				out = append(out, fmt.Sprintf("copy %d: status: want %d, got %d", i, e.Status, r.Status))
			}
		}
	}
	for i, r := range resps {
		for _, msg := range checkShown(e, r) {
			out = append(out, fmt.Sprintf("copy %d: %s", i, msg))
		}
		for _, each := range e.Each {
			if !each.Class.matches(r) {
				continue
			}
			for _, msg := range checkShown(&each.Expect, r) {
				out = append(out, fmt.Sprintf("copy %d (each %s): %s", i, each.Class.Label, msg))
			}
		}
	}
	return out
}

// checkCounts counts the responses per entry. A replay is counted only by an entry naming
// `replayed`, never under its status code; `rest` takes every response no other entry counts.
func checkCounts(counts []StatusCount, resps []*Response) []string {
	got := make([]int, len(counts))
	restIdx := -1
	unmatched := 0
	for i, c := range counts {
		if c.Rest {
			restIdx = i
		}
	}
	for _, r := range resps {
		found := false
		for i, c := range counts {
			if c.Class.matches(r) {
				got[i]++
				found = true
				break
			}
		}
		if !found {
			unmatched++
		}
	}
	var out []string
	fixed := 0
	for i, c := range counts {
		if !c.Rest {
			fixed += c.Count
			if got[i] != c.Count {
				out = append(out, fmt.Sprintf("statuses %s: want %d, got %d", c.Class.Label, c.Count, got[i]))
			}
		}
	}
	if restIdx >= 0 {
		if want := len(resps) - fixed; got[restIdx] != want {
			out = append(out, fmt.Sprintf("statuses %s: want the rest (%d), got %d", counts[restIdx].Class.Label, want, got[restIdx]))
		}
	}
	if unmatched > 0 {
		out = append(out, fmt.Sprintf("statuses: %d responses counted by no entry", unmatched))
	}
	return out
}

// distribution summarises parallel responses: "201 x1, 409 x18, replayed 201 x1".
func distribution(resps []*Response) string {
	n := map[string]int{}
	for _, r := range resps {
		k := fmt.Sprint(r.Status)
		if r.Replayed() {
			k = "replayed " + k
		}
		n[k]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s x%d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

// decodeJSON decodes a response body keeping numbers as their literal text.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

// subset reports where got fails to contain want: objects contain every expected member (more
// are allowed), arrays have the same length and contain element by element, numbers compare
// by value (10.5 equals 1.05e1), everything else exactly. It returns the JSON pointer of the
// first difference and why.
func subset(want, got any, at string) (string, string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return at, fmt.Sprintf("want an object, got %s", showValue(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return at + "/" + k, "missing"
			}
			if p, why := subset(w[k], gv, at+"/"+k); why != "" {
				return p, why
			}
		}
		return "", ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return at, fmt.Sprintf("want %s, got %s", showValue(want), showValue(got))
		}
		for i := range w {
			if p, why := subset(w[i], g[i], fmt.Sprintf("%s/%d", at, i)); why != "" {
				return p, why
			}
		}
		return "", ""
	case Number:
		if g, ok := got.(json.Number); ok {
			a, ok1 := new(big.Rat).SetString(string(w))
			b, ok2 := new(big.Rat).SetString(string(g))
			if ok1 && ok2 && a.Cmp(b) == 0 {
				return "", ""
			}
		}
	default:
		if want == got {
			return "", ""
		}
	}
	return at, fmt.Sprintf("want %s, got %s", showValue(want), showValue(got))
}

func showValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// quoteBody shows a body in a message, cut to a readable length: as is when it is printable
// text (JSON bodies read best that way), quoted otherwise.
func quoteBody(b []byte) string {
	const max = 300
	cut, more := b, ""
	if len(b) > max {
		cut, more = b[:max], fmt.Sprintf("… (%d bytes)", len(b))
	}
	if len(cut) > 0 && utf8.Valid(cut) && !bytes.ContainsFunc(cut, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return string(cut) + more
	}
	return fmt.Sprintf("%q", cut) + more
}
