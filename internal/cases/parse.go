package cases

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// caseFileName is the name a case file must have to be picked up by LoadDir: NNN-name.yaml.
var caseFileName = regexp.MustCompile(`^[0-9]+-[^/]+\.ya?ml$`)

// refPattern is a `${N.field}` reference to step N's JSON response body; field may be a dotted
// path ("${0.payer.name}").
var refPattern = regexp.MustCompile(`\$\{([0-9]+)\.([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)\}`)

// LoadDir reads every case file (NNN-name.yaml, sorted by name) in dir. Every problem of every
// file is reported, each with its file and line; a folder holding no case file is an error too.
func LoadDir(dir string) ([]*Case, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && caseFileName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("read cases: no case files (NNN-name.yaml) in %s", dir)
	}
	var out []*Case
	var errs []error
	for _, n := range names {
		c, err := ParseFile(filepath.Join(dir, n))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// ParseFile reads one case file.
func ParseFile(path string) (*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read case: %w", err)
	}
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".yaml"), ".yml")
	return Parse(path, name, data)
}

// Parse reads a case from data; file is used in messages, name becomes Case.Name. The format is
// decoded strictly: an unknown field, a wrong type or a reference to a step that cannot supply
// it is an error naming file and line.
func Parse(file, name string, data []byte) (*Case, error) {
	p := &parser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: empty case file", file)
	}
	c := &Case{Name: name, File: file}
	p.parseCase(doc.Content[0], c)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

// parser collects located errors so that one run reports every problem of a file.
type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...)))
}

// fields walks a mapping node, calling fn for each known key and reporting unknown or
// duplicate keys.
func (p *parser) fields(n *yaml.Node, what string, fn map[string]func(v *yaml.Node)) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: want a mapping, got %s", what, kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if seen[k.Value] {
			p.errorf(k, "%s: %q given twice", what, k.Value)
			continue
		}
		seen[k.Value] = true
		f, ok := fn[k.Value]
		if !ok {
			known := make([]string, 0, len(fn))
			for name := range fn {
				known = append(known, name)
			}
			sort.Strings(known)
			p.errorf(k, "%s: unknown field %q (known: %s)", what, k.Value, strings.Join(known, ", "))
			continue
		}
		f(v)
	}
}

func (p *parser) parseCase(n *yaml.Node, c *Case) {
	var stepsNode *yaml.Node
	p.fields(n, "case", map[string]func(*yaml.Node){
		"about": func(v *yaml.Node) { c.About = p.str(v, "about") },
		"steps": func(v *yaml.Node) { stepsNode = v },
		"effects": func(v *yaml.Node) {
			c.Effects = p.counters(v, "effects")
		},
		"effects_by_tenant": func(v *yaml.Node) {
			c.EffectsByTenant = map[string]map[string]int64{}
			p.fields(v, "effects_by_tenant", p.anyKey(v, func(k string, tv *yaml.Node) {
				if !tenantName.MatchString(k) {
					p.errorf(tv, "effects_by_tenant: tenant %q is not of the form t<N> (only those are made fresh per case)", k)
				}
				c.EffectsByTenant[k] = p.counters(tv, "effects_by_tenant."+k)
			}))
		},
	})
	if stepsNode == nil {
		p.errorf(n, "case: no steps")
		return
	}
	if stepsNode.Kind != yaml.SequenceNode || len(stepsNode.Content) == 0 {
		p.errorf(stepsNode, "steps: want a non-empty list")
		return
	}
	for i, sn := range stepsNode.Content {
		c.Steps = append(c.Steps, p.parseStep(resolve(sn), i))
	}
	for i := range c.Steps {
		p.checkRefs(c, i)
	}
}

// anyKey turns a mapping with free keys into the map fields expects.
func (p *parser) anyKey(n *yaml.Node, fn func(k string, v *yaml.Node)) map[string]func(*yaml.Node) {
	m := map[string]func(*yaml.Node){}
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		m[k] = func(v *yaml.Node) { fn(k, v) }
	}
	return m
}

func (p *parser) parseStep(n *yaml.Node, index int) Step {
	s := Step{Line: n.Line, Parallel: 1}
	what := fmt.Sprintf("steps[%d]", index)
	var haveReq, haveExpect bool
	p.fields(n, what, map[string]func(*yaml.Node){
		"request": func(v *yaml.Node) { haveReq = true; s.Request = p.parseRequest(v, what+".request") },
		"parallel": func(v *yaml.Node) {
			s.Parallel = p.integer(v, what+".parallel")
			if s.Parallel < 1 {
				p.errorf(v, "%s.parallel: want at least 1, got %d", what, s.Parallel)
				s.Parallel = 1
			}
		},
		"wait": func(v *yaml.Node) {
			d, err := time.ParseDuration(p.str(v, what+".wait"))
			if err != nil || d < 0 {
				p.errorf(v, "%s.wait: want a duration such as 500ms, got %q", what, v.Value)
			}
			s.Wait = d
		},
		"expect": func(v *yaml.Node) { haveExpect = true; s.Expect = p.parseExpect(v, what+".expect", true) },
	})
	if !haveReq {
		p.errorf(n, "%s: no request", what)
	}
	if !haveExpect {
		p.errorf(n, "%s: no expect", what)
	}
	e := &s.Expect
	if len(e.Statuses) > 0 && s.Parallel == 1 {
		p.errorf(n, "%s: statuses counts the copies of a parallel step; use status for a single request", what)
	}
	if len(e.Statuses) > 0 && e.Status != 0 {
		p.errorf(n, "%s: give status or statuses, not both", what)
	}
	if e.HasSameAs && s.Parallel > 1 {
		p.errorf(n, "%s: same_as applies to a single request, not a parallel step", what)
	}
	if e.Status == 0 && len(e.Statuses) == 0 && len(e.Headers) == 0 && !e.HasBody && !e.HasSameAs &&
		e.Problem == "" && len(e.Each) == 0 {
		p.errorf(n, "%s.expect: states nothing", what)
	}
	p.checkStatuses(n, what, s.Parallel, e.Statuses)
	return s
}

// checkStatuses rejects a statuses table that no set of responses could satisfy unambiguously.
func (p *parser) checkStatuses(n *yaml.Node, what string, parallel int, counts []StatusCount) {
	if len(counts) == 0 {
		return
	}
	sum, rests := 0, 0
	for i, a := range counts {
		if a.Rest {
			rests++
		} else {
			sum += a.Count
		}
		for _, b := range counts[i+1:] {
			if a.Class.overlaps(b.Class) {
				p.errorf(n, "%s.statuses: %q and %q can count the same response", what, a.Class.Label, b.Class.Label)
			}
		}
	}
	switch {
	case rests > 1:
		p.errorf(n, "%s.statuses: rest given more than once", what)
	case sum > parallel:
		p.errorf(n, "%s.statuses: counts add up to %d, more than parallel: %d", what, sum, parallel)
	case rests == 0 && sum != parallel:
		p.errorf(n, "%s.statuses: counts add up to %d, not parallel: %d (use rest for the remainder)", what, sum, parallel)
	}
}

func (p *parser) parseRequest(n *yaml.Node, what string) Request {
	var r Request
	var haveBody bool
	p.fields(n, what, map[string]func(*yaml.Node){
		"method": func(v *yaml.Node) { r.Method = p.str(v, what+".method") },
		"path":   func(v *yaml.Node) { r.Path = p.str(v, what+".path") },
		"headers": func(v *yaml.Node) {
			p.fields(v, what+".headers", p.anyKey(v, func(k string, hv *yaml.Node) {
				if hv.Kind == yaml.SequenceNode {
					for _, item := range hv.Content {
						r.Header = append(r.Header, HeaderLine{k, p.scalar(resolve(item), what+".headers."+k)})
					}
					return
				}
				r.Header = append(r.Header, HeaderLine{k, p.scalar(hv, what+".headers."+k)})
			}))
		},
		"body": func(v *yaml.Node) {
			if haveBody {
				p.errorf(v, "%s: give body or body_base64, not both", what)
			}
			haveBody = true
			r.Body = []byte(p.str(v, what+".body"))
		},
		"body_base64": func(v *yaml.Node) {
			if haveBody {
				p.errorf(v, "%s: give body or body_base64, not both", what)
			}
			haveBody = true
			b, err := base64.StdEncoding.DecodeString(p.str(v, what+".body_base64"))
			if err != nil {
				p.errorf(v, "%s.body_base64: %v", what, err)
			}
			r.Body = b
		},
	})
	if !httpToken.MatchString(r.Method) {
		p.errorf(n, "%s.method: want an HTTP method such as POST, got %q", what, r.Method)
	}
	if !strings.HasPrefix(r.Path, "/") {
		p.errorf(n, "%s.path: want a path starting with /, got %q", what, r.Path)
	}
	return r
}

var (
	httpToken  = regexp.MustCompile(`^[A-Z]+$`)
	tenantName = regexp.MustCompile(`^t[0-9]+$`)
)

// parseExpect reads an expect block; top is false inside `each`, where only what a single
// response shows may be stated.
func (p *parser) parseExpect(n *yaml.Node, what string, top bool) Expect {
	var e Expect
	fields := map[string]func(*yaml.Node){
		"status": func(v *yaml.Node) {
			e.Status = p.integer(v, what+".status")
			if e.Status < 100 || e.Status > 599 {
				p.errorf(v, "%s.status: %d is not an HTTP status code", what, e.Status)
			}
		},
		"headers": func(v *yaml.Node) {
			seen := map[string]bool{}
			p.fields(v, what+".headers", p.anyKey(v, func(k string, hv *yaml.Node) {
				lk := strings.ToLower(k)
				if seen[lk] {
					p.errorf(hv, "%s.headers: %q given twice (names are case-insensitive)", what, k)
				}
				seen[lk] = true
				val := p.scalar(hv, what+".headers."+k)
				h := HeaderExpect{Name: k}
				switch val {
				case "present":
					h.Present = true
				case "absent":
					h.Absent = true
				default:
					h.Value = val
				}
				e.Headers = append(e.Headers, h)
			}))
		},
		"body": func(v *yaml.Node) {
			e.Body, e.HasBody = p.value(v, what+".body"), true
		},
		"problem": func(v *yaml.Node) { e.Problem = p.str(v, what+".problem") },
	}
	if top {
		fields["same_as"] = func(v *yaml.Node) { e.SameAs, e.HasSameAs = p.integer(v, what+".same_as"), true }
		fields["statuses"] = func(v *yaml.Node) {
			p.fields(v, what+".statuses", p.anyKey(v, func(k string, cv *yaml.Node) {
				sc := StatusCount{Class: p.class(cv, what+".statuses", k)}
				if cv.Kind == yaml.ScalarNode && cv.Value == "rest" {
					sc.Rest = true
				} else {
					sc.Count = p.integer(cv, what+".statuses."+k)
					if sc.Count < 0 {
						p.errorf(cv, "%s.statuses.%s: negative count", what, k)
					}
				}
				e.Statuses = append(e.Statuses, sc)
			}))
		}
		fields["each"] = func(v *yaml.Node) {
			p.fields(v, what+".each", p.anyKey(v, func(k string, ev *yaml.Node) {
				e.Each = append(e.Each, EachExpect{
					Class:  p.class(ev, what+".each", k),
					Expect: p.parseExpect(ev, what+".each."+k, false),
				})
			}))
		}
	}
	p.fields(n, what, fields)
	return e
}

// class reads a response class written as a key: "201", "409|replayed".
func (p *parser) class(at *yaml.Node, what, label string) Class {
	c := Class{Label: label}
	for _, alt := range strings.Split(label, "|") {
		alt = strings.TrimSpace(alt)
		if alt == "replayed" {
			c.Replayed = true
			continue
		}
		code, err := strconv.Atoi(alt)
		if err != nil || code < 100 || code > 599 {
			p.errorf(at, "%s: %q is neither a status code nor replayed", what, alt)
			continue
		}
		c.Codes = append(c.Codes, code)
	}
	return c
}

// checkRefs verifies that same_as and ${N.field} name an earlier single-request step.
func (p *parser) checkRefs(c *Case, i int) {
	s := &c.Steps[i]
	check := func(n int, what string) {
		switch {
		case n < 0 || n >= i:
			p.errorf(&yaml.Node{Line: s.Line}, "steps[%d]: %s refers to step %d, which has not run yet", i, what, n)
		case c.Steps[n].Parallel > 1:
			p.errorf(&yaml.Node{Line: s.Line}, "steps[%d]: %s refers to step %d, a parallel step with several responses", i, what, n)
		}
	}
	if s.Expect.HasSameAs {
		check(s.Expect.SameAs, "same_as")
	}
	texts := []string{s.Request.Path, string(s.Request.Body)}
	for _, h := range s.Request.Header {
		texts = append(texts, h.Value)
	}
	for _, t := range texts {
		for _, m := range refPattern.FindAllStringSubmatch(t, -1) {
			n, _ := strconv.Atoi(m[1])
			check(n, m[0])
		}
	}
}

func (p *parser) counters(n *yaml.Node, what string) map[string]int64 {
	out := map[string]int64{}
	p.fields(n, what, p.anyKey(n, func(k string, v *yaml.Node) {
		out[k] = int64(p.integer(v, what+"."+k))
	}))
	return out
}

func (p *parser) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n, "%s: want a string, got %s", what, kindName(n))
		return ""
	}
	return n.Value
}

// scalar accepts any scalar as text: header values are text whatever YAML would resolve them to
// (`X-Test-Fail: 500` is the string "500").
func (p *parser) scalar(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errorf(n, "%s: want a value, got %s", what, kindName(n))
		return ""
	}
	return n.Value
}

func (p *parser) integer(n *yaml.Node, what string) int {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		if v, err := strconv.Atoi(n.Value); err == nil {
			return v
		}
	}
	p.errorf(n, "%s: want an integer, got %s %q", what, kindName(n), n.Value)
	return 0
}

// value converts an expected body to the JSON-like values the matcher compares.
func (p *parser) value(n *yaml.Node, what string) any {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				p.errorf(n.Content[i], "%s: %q given twice", what, k)
			}
			m[k] = p.value(n.Content[i+1], what+"."+k)
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			s = append(s, p.value(item, fmt.Sprintf("%s[%d]", what, i)))
		}
		return s
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return n.Value
		case "!!bool":
			return n.Value == "true"
		case "!!null":
			return nil
		case "!!int", "!!float":
			if _, ok := new(big.Rat).SetString(n.Value); !ok {
				p.errorf(n, "%s: %q is not a finite decimal number", what, n.Value)
			}
			return Number(n.Value)
		}
	}
	p.errorf(n, "%s: unsupported value %s", what, kindName(n))
	return nil
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strings.TrimPrefix(n.ShortTag(), "!!")
	}
	return "nothing"
}
