package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/model"
)

// TestNoSilentKeyedOperation: no keyed operation is missed without a word (issue 40's "Done
// when"). An oracle of its own reads every spec in testdata/specs (vendor specs, the golden
// specs and the small ones) and, in the workspace, ../shared/specs, as raw YAML or JSON: an
// unsafe operation whose own words (summary, description, the descriptions and titles of its
// parameters and request body, $refs followed) say idempotent, deduplicated, "retry … the
// same", "at most once"…, or that declares a header, query parameter or body field named as a
// key (idempot…, a retry or dedup key, PayPal-Request-Id, Repeatability-Request-Id), is keyed.
// Loaded as `idemgen check --infer` loads it, each such operation must be marked (by the spec
// or --infer) or warned about (possible-, described- or item-idempotency-key: check's words for
// a key --infer does not take), or be in a document that fails with errors; the few that are
// none of these are listed in silentExceptions with the reason. The other way round, whatever
// --infer marks or those warnings name must be keyed to the oracle, so a false positive of the
// detector fails here too, and the oracle cannot go blind unnoticed.
//
// The oracle shares no code with the detector (detect.go, described.go): it walks decoded
// documents, not kin-openapi's, with its own rules, so the test fails when the detector loses a
// rule. Without --infer the same operations get unmarked-idempotency-key instead of a mark, and
// the other warnings are the same (build.go's mark), so one load per document answers both.
// go test -run TestNoSilentKeyedOperation -v prints the figures.
func TestNoSilentKeyedOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("loads every spec of testdata/specs and ../shared/specs (about 30 MB)")
	}
	roots := []string{"../../testdata/specs"}
	// The workspace's shared specs, beside the repository (CI has them; a clone may not). A
	// copy identical to one in testdata (all the files it reads) is scanned once.
	const shared = "../../../shared/specs"
	if fi, err := os.Stat(shared); err == nil && fi.IsDir() {
		roots = append(roots, shared)
	} else {
		t.Logf("no %s (only in the idemgen workspace): testdata/specs only", shared)
	}
	o := &oracle{files: map[string]any{}, sums: map[string]string{}}
	seen := map[string]string{} // the contents of the files a document reads → its path
	var docs, keyed, marked, warned, behindErrors int
	found := map[string]bool{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
				return err
			}
			ops, read, ok := o.document(path)
			if !ok {
				return nil // not an OpenAPI document (a config, an overlay, a fragment) or not parseable (broken/)
			}
			if first, dup := seen[read]; dup {
				t.Logf("%s: the same files as %s", path, first)
				return nil
			}
			seen[read] = path
			docs++
			keyed += len(ops)
			m, w, b := checkSilent(t, path, ops, found)
			marked, warned, behindErrors = marked+m, warned+w, behindErrors+b
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, why := range silentExceptions {
		if !found[k] {
			t.Errorf("exception %q (%s) did not occur: remove it", k, why)
		}
	}
	t.Logf("%d documents, %d keyed operations: %d marked, %d warned, %d in documents that fail with errors, %d listed exceptions",
		docs, keyed, marked, warned, behindErrors, len(silentExceptions))
	// 89 documents and 337 keyed operations when this test was written.
	if docs < 50 || keyed < 300 {
		t.Errorf("the oracle read %d documents and found %d keyed operations: it has gone blind", docs, keyed)
	}
}

// silentExceptions are keyed operations idemgen deliberately neither marks nor warns about,
// by document file name, method and path, with the reason.
var silentExceptions = map[string]string{
	// The "by <field>" rule (detect.go's namesAnotherRequest).
	"square-connect-v2-oas3-2025-05-21.json POST /v2/payments/cancel": "CancelPaymentByIdempotencyKey takes the idempotency_key of the payment to cancel, not a key of its own",
	"rules.yaml POST /payments/cancel":                                "infer/rules.yaml's stand-in for Square's CancelPaymentByIdempotencyKey",
	// A vendor's words with nothing behind them.
	"square-connect-v2-oas3-2025-05-21.json POST /v2/bookings/custom-attributes/bulk-delete": "its items' schema (BookingCustomAttributeDeleteRequest) says each holds \"an optional idempotency key\" but declares no field for it (only booking_id and key): there is nothing to mark",
	// A negative case of the detector's own tests.
	"described.yaml POST /webhooks": "infer/described.yaml's \"not a key\" case: its idempotent field is a boolean setting, and the deduplication it speaks of is of webhook deliveries",
}

// keyWords is the oracle's test for words that say a request is idempotent or deduplicated: the
// words issue 40 lists, as the i40 measurement's scanner wrote them, and AIP-155's ("the server
// will know to ignore the request if it has already been completed").
var keyWords = regexp.MustCompile(`(?i)idempot|\bde-?dup|deduplicat|already (?:been )?completed|` +
	`\bretr(?:y|ies|ied|ying)\b[^.;]{0,80}\bsame\b|\bsame\b[^.;]{0,80}\bretr(?:y|ies)|` +
	`at most once|exactly once|processed (?:more than once|multiple times|twice)|` +
	`(?:prevent|avoid|detect|ignore|reject)\w*\s+(?:the\s+|any\s+)?duplicat|` +
	`duplicate (?:request|submission|transaction|payment|event|message|charge|order)s?`)

// keyName reports whether a parameter or field name names an idempotency key by itself: any
// spelling with "idempot", a retry or deduplication key, and the two key headers whose names
// say neither (PayPal's, and OASIS Repeatable Requests').
func keyName(name string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	n := b.String()
	return strings.Contains(n, "idempot") || strings.Contains(n, "retrykey") || strings.Contains(n, "dedup") ||
		n == "paypalrequestid" || n == "repeatabilityrequestid"
}

// checkSilent loads one document as check --infer does and holds it against the oracle's keyed
// operations; found records the exceptions that occurred. It returns how many keyed operations
// are marked, warned about, or in a document that fails with errors.
func checkSilent(t *testing.T, path string, ops map[string]string, found map[string]bool) (marked, warned, behindErrors int) {
	t.Helper()
	res := load(t, Options{Path: path, Infer: true})
	if res.Doc == nil {
		// Nothing is listed, but the run fails with located errors: not silent.
		if len(errorsOf(res.Diags)) == 0 {
			t.Errorf("%s: no model and no error", path)
		}
		return 0, 0, len(ops)
	}
	marks, inferred := map[string]bool{}, map[string]bool{}
	for _, op := range res.Doc.Operations {
		marks[op.Method+" "+op.Path] = true
		if op.Mark == model.MarkInfer {
			inferred[op.Method+" "+op.Path] = true
		}
	}
	warns := map[string]string{}
	for _, d := range res.Diags.Sorted() {
		switch d.Code {
		case "possible-idempotency-key", "described-idempotency-key", "item-idempotency-keys":
			f := strings.Fields(d.Message)
			warns[f[0]+" "+f[1]] = d.Code
		}
	}
	base := filepath.Base(path)
	for op, why := range ops {
		k := base + " " + op
		switch {
		case marks[op]:
			marked++
		case warns[op] != "":
			warned++
		case silentExceptions[k] != "":
			found[k] = true
		default:
			t.Errorf("%s %s is keyed (%s) but neither marked by --infer nor warned about by check", path, op, why)
		}
		if (marks[op] || warns[op] != "") && silentExceptions[k] != "" {
			t.Errorf("%s %s is listed as an exception but is marked or warned about: remove the exception", path, op)
		}
	}
	for op := range inferred {
		if ops[op] == "" {
			t.Errorf("%s %s: --infer marks it, but nothing in its words or names makes it keyed", path, op)
		}
	}
	for op, code := range warns {
		if ops[op] == "" {
			t.Errorf("%s %s: %s, but nothing in its words or names makes it keyed", path, op, code)
		}
	}
	return marked, warned, 0
}

// oracle reads OpenAPI 3.x and Swagger 2.0 documents as plain decoded YAML or JSON.
type oracle struct {
	files map[string]any    // decoded files by path
	sums  map[string]string // their contents' digests
	read  map[string]bool   // the files the current document reads
}

// document returns the keyed unsafe operations of the document at path ("POST /payments" → why
// it is keyed) and the digests of the files it reads; ok is false for a file that is no
// OpenAPI document.
func (o *oracle) document(path string) (ops map[string]string, read string, ok bool) {
	o.read = map[string]bool{}
	root, err := o.file(path)
	top, isMap := root.(map[string]any)
	if err != nil || !isMap || (top["openapi"] == nil && top["swagger"] == nil) {
		return nil, "", false
	}
	ops = map[string]string{}
	paths, _ := top["paths"].(map[string]any)
	for p, item := range paths {
		item, itemFile := o.deref(item, path)
		im, _ := item.(map[string]any)
		for _, method := range []string{"post", "put", "patch", "delete"} {
			op, _ := im[method].(map[string]any)
			if op == nil || optedOut(op) {
				continue
			}
			var params []any
			if ps, ok := op["parameters"].([]any); ok {
				params = ps
			}
			if ps, ok := im["parameters"].([]any); ok {
				params = append(params, ps...)
			}
			if why := o.keyed(op, params, itemFile); why != "" {
				ops[strings.ToUpper(method)+" "+p] = why
			}
		}
	}
	var sums []string
	for f := range o.read {
		sums = append(sums, o.sums[f])
	}
	slices.Sort(sums)
	return ops, strings.Join(sums, ","), true
}

// optedOut reports whether the spec's author said the operation takes no key (x-idempotent,
// x-idempotency or Fern's x-fern-idempotent set to false).
func optedOut(op map[string]any) bool {
	for _, ext := range []string{"x-idempotent", "x-idempotency", "x-fern-idempotent"} {
		if v, ok := op[ext].(bool); ok && !v {
			return true
		}
	}
	return false
}

// keyed says why an operation is keyed, "" when nothing says so.
func (o *oracle) keyed(op map[string]any, params []any, file string) string {
	w := &evidence{o: o, seen: map[uintptr]bool{}}
	w.words(op["summary"], "summary")
	w.words(op["description"], "description")
	for _, p := range params {
		p, pf := o.deref(p, file)
		pm, _ := p.(map[string]any)
		name, _ := pm["name"].(string)
		in, _ := pm["in"].(string)
		w.words(pm["description"], in+" "+name)
		switch in {
		case "header", "query", "formData":
			if keyName(name) && stringTyped(pm) {
				w.note(in + " " + name + " is named as a key")
			}
			w.schema(pm["schema"], pf, 0, false)
		case "body": // Swagger 2.0
			w.schema(pm["schema"], pf, 0, true)
		}
	}
	if rb, rf := o.deref(op["requestBody"], file); rb != nil {
		rm, _ := rb.(map[string]any)
		w.words(rm["description"], "request body")
		content, _ := rm["content"].(map[string]any)
		for _, media := range content {
			mm, _ := media.(map[string]any)
			w.schema(mm["schema"], rf, 0, true)
		}
	}
	return w.why
}

// evidence collects the first reason an operation is keyed.
type evidence struct {
	o    *oracle
	seen map[uintptr]bool // schemas on the way down, against $ref cycles
	why  string
}

func (w *evidence) note(why string) {
	if w.why == "" {
		w.why = why
	}
}

func (w *evidence) words(v any, where string) {
	if s, ok := v.(string); ok {
		if m := keyWords.FindString(s); m != "" {
			w.note(fmt.Sprintf("%s says %q", where, m))
		}
	}
}

// schema reads a schema's words and, in a request body (names), its properties' names, six
// levels down through properties, items, additionalProperties and compositions.
func (w *evidence) schema(v any, file string, depth int, names bool) {
	v, file = w.o.deref(v, file)
	s, ok := v.(map[string]any)
	if !ok || depth > 6 {
		return
	}
	id := reflect.ValueOf(s).Pointer()
	if w.seen[id] {
		return
	}
	w.seen[id] = true
	defer delete(w.seen, id)
	w.words(s["description"], "a schema's description")
	w.words(s["title"], "a schema's title")
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		if pm, _ := w.o.deref(p, file); names && keyName(name) && stringTyped(pm) {
			w.note("body field " + name + " is named as a key")
		}
		w.schema(p, file, depth+1, names)
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		w.schema(s[k], file, depth+1, names)
	}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		members, _ := s[k].([]any)
		for _, m := range members {
			w.schema(m, file, depth+1, names)
		}
	}
}

// stringTyped reports whether a parameter or schema may be a string: a boolean or a number named
// "idempotent" is a setting, not a key.
func stringTyped(v any) bool {
	m, _ := v.(map[string]any)
	if s, ok := m["schema"].(map[string]any); ok && m["in"] != nil {
		m = s
	}
	switch t := m["type"].(type) {
	case nil:
		return true
	case string:
		return t == "string"
	case []any:
		return slices.Contains(t, any("string"))
	}
	return false
}

// deref follows $refs (local, or relative files) to the value they stand for and the file it
// is in; a reference it cannot follow (remote, dangling) is nil.
func (o *oracle) deref(v any, file string) (any, string) {
	for range 32 {
		m, ok := v.(map[string]any)
		if !ok {
			return v, file
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v, file
		}
		target, frag, _ := strings.Cut(ref, "#")
		if strings.Contains(target, "://") {
			return nil, file
		}
		if target != "" {
			file = filepath.Join(filepath.Dir(file), target)
		}
		doc, err := o.file(file)
		if err != nil {
			return nil, file
		}
		if frag, err = url.PathUnescape(frag); err != nil {
			return nil, file
		}
		v = doc
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if tok == "" {
				continue
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := v.(type) {
			case map[string]any:
				v = c[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) {
					return nil, file
				}
				v = c[i]
			default:
				return nil, file
			}
		}
	}
	return nil, file
}

// file decodes a YAML or JSON file once; maps have string keys throughout.
func (o *oracle) file(path string) (any, error) {
	path = filepath.Clean(path)
	o.read[path] = true
	if v, ok := o.files[path]; ok {
		return v, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v any
	if filepath.Ext(path) == ".json" {
		d := json.NewDecoder(bytes.NewReader(raw))
		err = d.Decode(&v)
	} else {
		err = yaml.Unmarshal(raw, &v)
		v = stringKeys(v)
	}
	if err != nil {
		return nil, err
	}
	o.files[path] = v
	o.sums[path] = fmt.Sprintf("%x", sha256.Sum256(raw))
	return v, nil
}

// stringKeys turns YAML maps with non-string keys (response codes as numbers) into maps keyed
// by the keys' text.
func stringKeys(v any) any {
	switch c := v.(type) {
	case map[string]any:
		for k, e := range c {
			c[k] = stringKeys(e)
		}
	case map[any]any:
		m := make(map[string]any, len(c))
		for k, e := range c {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range c {
			c[i] = stringKeys(e)
		}
	}
	return v
}
