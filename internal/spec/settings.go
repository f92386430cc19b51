package spec

import (
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
)

// layer is one source of idempotency settings (document x-idempotency, config defaults, an
// operation's x-idempotent, a config entry), decoded strictly: only the fields it sets are
// non-nil. Layers merge field by field, the later one winning.
type layer struct {
	keyHeader, keyBody, keyQuery    *string
	keyRequired                     *bool
	keyMin, keyMax                  *int
	keyPattern                      *string
	keyChars, keyQuoted             *string
	keyEcho                         *bool
	bodyNulls                       *model.Nulls
	bodyUnknown                     *model.Unknown
	scope                           *model.Scope
	mode                            *model.Mode
	retention, lease                *time.Duration
	wait                            *time.Duration
	tombstone                       *time.Duration
	detach                          *bool
	execLimit                       *time.Duration
	exclude                         []string
	excludeSet                      bool
	fpHeaders                       []string
	fpHeadersSet                    bool
	fpBody                          *model.BodyMode
	replayHeaders                   []string
	replayHeadersSet                bool
	statuses                        []model.StatusRule
	statusesSet                     bool
	bodyLimit, respLimit, partLimit *int64
	profile                         *model.Profile
	errors                          *errorsSetting // errors.go

	// locs records where each set field was written, by its path inside the settings object
	// ("key/body", "fingerprint/exclude/0"), for errors found after merging.
	locs map[string]diag.Loc
}

// settingsDecoder decodes one settings object. base locates the object itself: its File and
// Line are used for values that carry no position (extension values kin-openapi has already
// decoded), and its Pointer prefixes every setting's pointer.
type settingsDecoder struct {
	base diag.Loc
	d    *diag.List
	l    *layer
}

// decodeMark decodes an x-idempotent value or a config entry: true (all defaults), false (not
// marked) or a settings object. It returns whether the operation is marked.
func decodeMark(n *yaml.Node, base diag.Loc, d *diag.List) (bool, *layer) {
	sd := &settingsDecoder{base: base, d: d, l: &layer{locs: map[string]diag.Loc{}}}
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
		b, _ := strconv.ParseBool(n.Value)
		return b, sd.l
	case n.Kind == yaml.MappingNode:
		sd.object(n)
		return true, sd.l
	}
	sd.errf(n, "", "wrong-type", "must be true, false (not marked) or a settings object, not %s", describe(n))
	return true, sd.l
}

// decodeDefaults decodes a document-level x-idempotency or config `defaults` object.
func decodeDefaults(n *yaml.Node, base diag.Loc, d *diag.List) *layer {
	sd := &settingsDecoder{base: base, d: d, l: &layer{locs: map[string]diag.Loc{}}}
	if n.Kind != yaml.MappingNode {
		sd.errf(n, "", "wrong-type", "must be a settings object, not %s", describe(n))
		return sd.l
	}
	sd.object(n)
	return sd.l
}

func (sd *settingsDecoder) loc(n *yaml.Node, path string) diag.Loc {
	l := sd.base
	if n != nil && n.Line > 0 {
		l.Line, l.Column = n.Line, n.Column
	}
	if path != "" {
		l.Pointer += "/" + path
	}
	return l
}

func (sd *settingsDecoder) errf(n *yaml.Node, path, code, format string, args ...any) {
	name := "idempotency settings"
	if path != "" {
		name = strings.ReplaceAll(path, "/", ".")
	}
	sd.d.Errorf(sd.loc(n, path), code, "%s: %s", name, fmt.Sprintf(format, args...))
}

// fields walks a mapping, calling set for every known field and reporting unknown ones.
func (sd *settingsDecoder) fields(n *yaml.Node, prefix string, known []string, set func(key string, v *yaml.Node, path string)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := join(prefix, k.Value)
		if !slices.Contains(known, k.Value) {
			if near := closest(k.Value, known); near != "" {
				sd.errf(k, path, "unknown-field", "unknown field %q; did you mean %q?", k.Value, near)
			} else {
				sd.errf(k, path, "unknown-field", "unknown field %q (known: %s)", k.Value, strings.Join(known, ", "))
			}
			continue
		}
		sd.l.locs[path] = sd.loc(v, path)
		set(k.Value, v, path)
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "/" + k
}

func (sd *settingsDecoder) object(n *yaml.Node) {
	l := sd.l
	sd.fields(n, "", []string{"key", "scope", "retention", "tombstone", "lease", "mode", "fingerprint", "replay", "concurrency", "execution", "limits", "profile", "errors", "body"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "body":
			if sd.mapping(v, path) {
				sd.body(v, path)
			}
		case "errors":
			l.errors = sd.errorsMapping(v, path)
		case "profile":
			if s, ok := sd.enum(v, path, defaults.ProfileNames()...); ok {
				p := model.Profile(s)
				l.profile = &p
			}
		case "key":
			if sd.mapping(v, path) {
				sd.key(v, path)
			}
		case "scope":
			if s, ok := sd.enum(v, path, defaults.ScopeNames()...); ok {
				sc := model.Scope(s)
				l.scope = &sc
			}
		case "mode":
			if s, ok := sd.enum(v, path, "atomic", "lease"); ok {
				m := model.Mode(s)
				l.mode = &m
			}
		case "retention":
			l.retention = sd.duration(v, path, false)
		case "tombstone":
			l.tombstone = sd.duration(v, path, true)
		case "execution":
			if sd.mapping(v, path) {
				sd.fields(v, path, []string{"detach", "limit"}, func(k string, v *yaml.Node, path string) {
					if k == "detach" {
						l.detach = sd.boolean(v, path)
					} else {
						l.execLimit = sd.duration(v, path, false)
					}
				})
			}
		case "lease":
			l.lease = sd.duration(v, path, false)
		case "fingerprint":
			if sd.mapping(v, path) {
				sd.fingerprint(v, path)
			}
		case "replay":
			if sd.mapping(v, path) {
				sd.replay(v, path)
			}
		case "concurrency":
			if sd.mapping(v, path) {
				sd.fields(v, path, []string{"wait"}, func(_ string, v *yaml.Node, path string) {
					l.wait = sd.duration(v, path, true)
				})
			}
		case "limits":
			if sd.mapping(v, path) {
				sd.fields(v, path, []string{"body", "response", "part"}, func(k string, v *yaml.Node, path string) {
					switch k {
					case "body":
						l.bodyLimit = sd.size(v, path)
					case "response":
						l.respLimit = sd.size(v, path)
					default:
						l.partLimit = sd.size(v, path)
					}
				})
			}
		}
	})
}

func (sd *settingsDecoder) key(n *yaml.Node, prefix string) {
	l := sd.l
	sd.fields(n, prefix, []string{"header", "body", "query", "required", "minLength", "maxLength", "pattern", "characters", "quoted", "echo"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "characters":
			if s, ok := sd.enum(v, path, defaults.KeyCharactersNames()...); ok {
				l.keyChars = &s
			}
		case "quoted":
			if s, ok := sd.enum(v, path, defaults.KeyQuotingNames()...); ok {
				l.keyQuoted = &s
			}
		case "echo":
			l.keyEcho = sd.boolean(v, path)
		case "header":
			if s, ok := sd.str(v, path); ok {
				if !validToken(s) {
					sd.errf(v, path, "bad-value", "%q is not a valid HTTP header name", s)
					return
				}
				l.keyHeader = &s
			}
		case "body":
			if s, ok := sd.str(v, path); ok {
				if s == "" {
					sd.errf(v, path, "bad-value", "must be a JSON pointer such as /idempotency_key (or a form field name)")
					return
				}
				l.keyBody = &s
			}
		case "query":
			if s, ok := sd.str(v, path); ok {
				if s == "" {
					sd.errf(v, path, "bad-value", "must name the query parameter that carries the key, such as request_id")
					return
				}
				l.keyQuery = &s
			}
		case "required":
			l.keyRequired = sd.boolean(v, path)
		case "minLength":
			l.keyMin = sd.length(v, path)
		case "maxLength":
			l.keyMax = sd.length(v, path)
		case "pattern":
			if s, ok := sd.str(v, path); ok {
				if _, err := gen.CheckPattern(s); err != nil {
					sd.errf(v, path, "bad-pattern", "%q does not compile: %v", s, err)
					return
				}
				l.keyPattern = &s
			}
		}
	})
	set := 0
	for _, c := range []*string{l.keyHeader, l.keyBody, l.keyQuery} {
		if c != nil {
			set++
		}
	}
	if set > 1 {
		sd.errf(n, prefix, "key-conflict", "set one of key.header, key.body and key.query: the key travels in one place")
	}
}

// body decodes body.*: how a JSON request body is read beyond its schema.
func (sd *settingsDecoder) body(n *yaml.Node, prefix string) {
	l := sd.l
	sd.fields(n, prefix, []string{"nulls", "unknown"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "nulls":
			if s, ok := sd.enum(v, path, defaults.BodyNullsSchema, defaults.BodyNullsClear); ok {
				x := model.Nulls(s)
				l.bodyNulls = &x
			}
		case "unknown":
			if s, ok := sd.enum(v, path, defaults.BodyUnknownSchema, defaults.BodyUnknownAccept); ok {
				x := model.Unknown(s)
				l.bodyUnknown = &x
			}
		}
	})
}

func (sd *settingsDecoder) fingerprint(n *yaml.Node, prefix string) {
	l := sd.l
	sd.fields(n, prefix, []string{"exclude", "headers", "body"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "exclude":
			if items, ok := sd.strings(v, path); ok {
				for i, s := range items {
					if s == "" {
						sd.errf(v.Content[i], path+"/"+strconv.Itoa(i), "bad-value", "an empty pointer would exclude the whole body")
						continue
					}
					sd.l.locs[path+"/"+strconv.Itoa(i)] = sd.loc(v.Content[i], path+"/"+strconv.Itoa(i))
				}
				l.exclude, l.excludeSet = items, true
			}
		case "headers":
			if hs, ok := sd.headers(v, path); ok {
				l.fpHeaders, l.fpHeadersSet = hs, true
			}
		case "body":
			if s, ok := sd.enum(v, path, "canonical", "raw"); ok {
				b := model.BodyMode(s)
				l.fpBody = &b
			}
		}
	})
}

func (sd *settingsDecoder) replay(n *yaml.Node, prefix string) {
	l := sd.l
	sd.fields(n, prefix, []string{"headers", "statuses"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "headers":
			if hs, ok := sd.headers(v, path); ok {
				for i, h := range hs {
					if defaults.NeverStored(h) { // docs/runtime.md, Replay
						sd.errf(v, path+"/"+strconv.Itoa(i), "bad-value", "%s is never stored or replayed (docs/runtime.md, Replay)", h)
					}
				}
				l.replayHeaders, l.replayHeadersSet = hs, true
			}
		case "statuses":
			if v.Kind != yaml.SequenceNode {
				sd.errf(v, path, "wrong-type", "must be a list of status codes or classes, not %s", describe(v))
				return
			}
			if len(v.Content) == 0 {
				// The runtime reads an empty list as "not set" and would store the default
				// statuses, while list and the contract would show none: refuse it.
				sd.d.Errorf(sd.loc(v, path), "bad-value", "replay.statuses is empty: nothing would ever be stored; leave it out for the default %s", writtenStatuses(defaults.Statuses()))
				return
			}
			rules := []model.StatusRule{}
			for i, it := range v.Content {
				p := path + "/" + strconv.Itoa(i)
				if it.Kind != yaml.ScalarNode || (it.ShortTag() != "!!int" && it.ShortTag() != "!!str") {
					sd.errf(it, p, "wrong-type", "must be a status code or class (402, \"4xx\", \"!409\"), not %s", describe(it))
					continue
				}
				r, err := parseStatus(it.Value)
				if err != nil {
					sd.errf(it, p, "bad-status", "%v", err)
					continue
				}
				rules = append(rules, r)
			}
			if len(rules) == len(v.Content) {
				sd.lintStatuses(v, path, rules)
			}
			l.statuses, l.statusesSet = rules, true
		}
	})
}

// lintStatuses reports replay.statuses that lose money or read otherwise than they work
// (defaults.Final: the last matching rule decides): an error when no success is stored (every
// retry of a payment that succeeded runs it again), and a warning on each rule a later rule
// decides over, whose order changes its meaning. A declared success an operation's rules do
// not store is warned about where the operation is resolved (unstoredSuccesses).
func (sd *settingsDecoder) lintStatuses(v *yaml.Node, path string, rules []model.StatusRule) {
	rs := make([]defaults.StatusRule, len(rules))
	for i, r := range rules {
		rs[i] = defaults.StatusRule(r)
	}
	written := writtenStatuses(rs)
	if len(defaults.FinalIn(rs, 2)) == 0 {
		sd.d.Add(diag.Diagnostic{Severity: diag.Error, Code: "replay-stores-no-success", Loc: sd.loc(v, path),
			Message: fmt.Sprintf("replay.statuses %s stores no 2xx answer (the last matching rule decides): a success is never stored, so every retry of a request that succeeded (a payment made, its answer lost) runs it again", written),
			Hint:    fmt.Sprintf("put \"2xx\" first and the exclusions after the rules they narrow, e.g. %s", writtenStatuses(append([]defaults.StatusRule{{Class: 2}}, rs...)))})
	}
	for _, sh := range defaults.ShadowedRules(rs) {
		r := rs[sh.Rule]
		msg := fmt.Sprintf("replay.statuses: %q decides nothing: the rules after it match every status it matches, and the last matching rule decides", r.String())
		hint := "remove it"
		if sh.By >= 0 {
			msg = fmt.Sprintf("replay.statuses: %q decides nothing: %q after it matches the same statuses, and the last matching rule decides (the order changes its meaning)", r.String(), rs[sh.By].String())
			hint = fmt.Sprintf("write %q after %q for it to apply", r.String(), rs[sh.By].String())
		}
		sd.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "replay-rule-order", Loc: sd.loc(v.Content[sh.Rule], path+"/"+strconv.Itoa(sh.Rule)), Message: msg, Hint: hint})
	}
}

// writtenStatuses writes rules as a replay.statuses list: [2xx, 4xx, !408].
func writtenStatuses(rules []defaults.StatusRule) string {
	var ts []string
	for _, r := range rules {
		ts = append(ts, r.String())
	}
	return "[" + strings.Join(ts, ", ") + "]"
}

// parseStatus reads one replay.statuses entry: 402, "4xx", "!409", "!5xx".
func parseStatus(s string) (model.StatusRule, error) {
	var r model.StatusRule
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "!") {
		r.Exclude, t = true, t[1:]
	}
	if len(t) == 3 && strings.EqualFold(t[1:], "xx") && t[0] >= '1' && t[0] <= '5' {
		r.Class = int(t[0] - '0')
		return r, nil
	}
	code, err := strconv.Atoi(t)
	if err != nil || code < 100 || code > 599 {
		return r, fmt.Errorf("%q is neither a status code 100-599 nor a class such as \"4xx\" (prefix ! to exclude)", s)
	}
	r.Code = code
	return r, nil
}

func (sd *settingsDecoder) mapping(v *yaml.Node, path string) bool {
	if v.Kind != yaml.MappingNode {
		sd.errf(v, path, "wrong-type", "must be an object, not %s", describe(v))
		return false
	}
	return true
}

func (sd *settingsDecoder) str(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		sd.errf(v, path, "wrong-type", "must be a string, not %s", describe(v))
		return "", false
	}
	return v.Value, true
}

func (sd *settingsDecoder) strings(v *yaml.Node, path string) ([]string, bool) {
	if v.Kind != yaml.SequenceNode {
		sd.errf(v, path, "wrong-type", "must be a list of strings, not %s", describe(v))
		return nil, false
	}
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, it := range v.Content {
		s, good := sd.str(it, path+"/"+strconv.Itoa(i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// headers reads a list of header names into canonical MIME form, sorted, without duplicates.
func (sd *settingsDecoder) headers(v *yaml.Node, path string) ([]string, bool) {
	items, ok := sd.strings(v, path)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for i, h := range items {
		if !validToken(h) {
			sd.errf(v.Content[i], path+"/"+strconv.Itoa(i), "bad-value", "%q is not a valid HTTP header name", h)
			ok = false
			continue
		}
		out = append(out, textproto.CanonicalMIMEHeaderKey(h))
	}
	slices.Sort(out)
	return slices.Compact(out), ok
}

func (sd *settingsDecoder) enum(v *yaml.Node, path string, allowed ...string) (string, bool) {
	s, ok := sd.str(v, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		if near := closest(s, allowed); near != "" {
			sd.errf(v, path, "bad-value", "%q is not one of %s; did you mean %q?", s, strings.Join(allowed, ", "), near)
		} else {
			sd.errf(v, path, "bad-value", "%q is not one of %s", s, strings.Join(allowed, ", "))
		}
		return "", false
	}
	return s, true
}

func (sd *settingsDecoder) boolean(v *yaml.Node, path string) *bool {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		sd.errf(v, path, "wrong-type", "must be true or false, not %s", describe(v))
		return nil
	}
	b, _ := strconv.ParseBool(v.Value)
	return &b
}

// length reads a key length bound: a whole number from 1 to keyLengthLimit (8 KiB, what common
// proxies accept in a request header; stores keep a digest of the key, so its length costs
// them nothing).
func (sd *settingsDecoder) length(v *yaml.Node, path string) *int {
	n, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") || err != nil {
		sd.errf(v, path, "wrong-type", "must be a whole number, not %s", describe(v))
		return nil
	}
	if n < 1 || n > keyLengthLimit {
		sd.errf(v, path, "bad-value", "%d is out of range 1-%d", n, keyLengthLimit)
		return nil
	}
	return &n
}

// duration reads a Go duration ("30s", "24h", "1h30m"); zeroOK allows "0s" (concurrency.wait,
// tombstone).
func (sd *settingsDecoder) duration(v *yaml.Node, path string, zeroOK bool) *time.Duration {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		sd.errf(v, path, "wrong-type", "must be a duration string such as \"30s\" or \"24h\", not %s", describe(v))
		return nil
	}
	dur, err := time.ParseDuration(v.Value)
	switch {
	case err != nil:
		sd.errf(v, path, "bad-duration", "%q is not a Go duration (use forms like \"30s\", \"24h\", \"1h30m\")", v.Value)
		return nil
	case dur < 0 && zeroOK:
		sd.errf(v, path, "bad-duration", "%q must not be negative (0s is allowed)", v.Value)
		return nil
	case dur <= 0 && !zeroOK:
		sd.errf(v, path, "bad-duration", "%q must be positive", v.Value)
		return nil
	}
	return &dur
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// size reads a byte size: a whole number of bytes or a number with a B, KiB, MiB or GiB suffix.
func (sd *settingsDecoder) size(v *yaml.Node, path string) *int64 {
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!str" && v.ShortTag() != "!!int") {
		sd.errf(v, path, "wrong-type", "must be a size such as \"1MiB\", not %s", describe(v))
		return nil
	}
	n, err := parseSize(v.Value)
	if err != nil {
		sd.errf(v, path, "bad-size", "%v", err)
		return nil
	}
	return &n
}

func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a positive size (a number of bytes, or with a KiB, MiB or GiB suffix)", s)
	}
	return n * mult, nil
}

// describe names a node's type for messages: "a string", "a number", "true".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "null"
		}
	}
	return "a " + n.Tag
}

// validToken reports whether s is an RFC 9110 token (a valid header field name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// closest is the known name within two edits of name (ignoring case), "" when there is none.
func closest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
