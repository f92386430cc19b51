package spec

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
)

// keyRulesSpec: a header key declared with a pattern neither regexp engine compiles (line 11,
// an unclosed group) and no length bounds, and a body key whose pattern does not compile either
// (line 22) with a maxLength above idemgen's limit.
const keyRulesSpec = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      parameters:
        - name: Idempotency-Key
          in: header
          required: true
          schema: {type: string, pattern: '^(?!\s)(.*(\S)$'}
      responses: {"201": {description: ok}}
  /refunds:
    post:
      operationId: createRefund
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                idempotency_key: {type: string, maxLength: 256, pattern: '^(?![:\-]$\S+$'}
                amount: {type: integer}
      responses: {"201": {description: ok}}
`

// TestKeyPatternSettingReplacesTheDeclaredOne: with key.pattern in idemgen.yaml, as a default or
// for one operation, the key's declared pattern is replaced and is no error (docs/cli.md,
// bad-pattern: key.pattern replaces the pattern declared on the key's schema).
func TestKeyPatternSettingReplacesTheDeclaredOne(t *testing.T) {
	spec := writeFile(t, "openapi.yaml", keyRulesSpec)
	for name, cfg := range map[string]string{
		"default":       "version: 1\ndefaults:\n  key: {pattern: '^\\S+$'}\noperations:\n  createPayment: true\n  createRefund: {key: {body: /idempotency_key}}\n",
		"per operation": "version: 1\noperations:\n  createPayment: {key: {pattern: '^\\S+$'}}\n  createRefund: {key: {body: /idempotency_key, pattern: '^\\S+$'}}\n",
	} {
		res := load(t, Options{Path: spec, ConfigPath: writeFile(t, "idemgen.yaml", cfg)})
		if errs := errorsOf(res.Diags); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
			continue
		}
		for _, op := range res.Doc.Operations {
			if k := op.Settings.Key; k.Pattern != `^\S+$` || k.Sources.Pattern != model.RuleSettings {
				t.Errorf("%s: %s key %+v", name, op.ID, k)
			}
		}
	}
	// Without the setting each declared pattern is one error, where it is written, as the key's.
	res := load(t, Options{Path: spec, Infer: true})
	errs := errorsOf(res.Diags)
	if len(errs) != 2 {
		t.Fatalf("want 2 errors, got %v", errs)
	}
	for i, line := range []int{11, 22} {
		d := errs[i]
		if d.Code != "bad-pattern" || d.Loc.Line != line || !strings.HasSuffix(d.Loc.Pointer, "/pattern") ||
			!strings.Contains(d.Message, "idempotency key") || !strings.Contains(d.Hint, "key.pattern") {
			t.Errorf("error %d: %s (hint %q)", i, d, d.Hint)
		}
	}
}

// TestKeyPatternECMAScript: a declared key pattern in ECMA-262 syntax RE2 lacks (the lookaheads
// of real specs) is no error: it is the key's pattern, run by the ECMAScript engine.
func TestKeyPatternECMAScript(t *testing.T) {
	src := strings.Replace(strings.Replace(keyRulesSpec, `(.*(\S)$`, `(.*)(\S)$`, 1), `[:\-]$\S+$`, `[:\-]$)\S+$`, 1)
	res := load(t, Options{Path: writeFile(t, "openapi.yaml", src), Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := map[string]string{"createPayment": `^(?!\s)(.*)(\S)$`, "createRefund": `^(?![:\-]$)\S+$`}
	for _, op := range res.Doc.Operations {
		if k := op.Settings.Key; k.Pattern != want[op.ID] || k.Sources.Pattern != model.RuleSpec {
			t.Errorf("%s: key pattern %q from %s; want %q from the spec", op.ID, k.Pattern, k.Sources.Pattern, want[op.ID])
		}
	}
}

// TestInferTakesTheVendorsKeyRules: under --infer a key whose declaration sets no minLength
// accepts keys from 1 character, as the vendor does; marked by x-idempotent or the config, the
// default minimum of 16 applies. Each rule says where it came from. A declared maxLength above
// the default 255 is taken as it is; above 8192 it is capped, with a warning that says why.
func TestInferTakesTheVendorsKeyRules(t *testing.T) {
	path := "../../testdata/specs/infer/key-rules.yaml"
	res := load(t, Options{Path: path, Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]model.KeySettings{
		"createPayment": {Required: true, MinLength: 1, MaxLength: 255,
			Sources: model.KeySources{Required: model.RuleSpec, MinLength: model.RuleSpec, MaxLength: model.RuleDefault, Pattern: model.RuleDefault}},
		"createRefund": {Required: false, MinLength: 1, MaxLength: 256,
			Sources: model.KeySources{Required: model.RuleSpec, MinLength: model.RuleSpec, MaxLength: model.RuleSpec, Pattern: model.RuleDefault}},
		"createTransfer": {Required: false, MinLength: 1, MaxLength: 8192,
			Sources: model.KeySources{Required: model.RuleSpec, MinLength: model.RuleSpec, MaxLength: model.RuleSpec, Pattern: model.RuleDefault}},
	}
	for _, op := range res.Doc.Operations {
		k, w := op.Settings.Key, want[op.ID]
		if k.Required != w.Required || k.MinLength != w.MinLength || k.MaxLength != w.MaxLength || k.Sources != w.Sources {
			t.Errorf("%s: key %+v, want %+v", op.ID, k, w)
		}
	}
	var capped []string
	for _, d := range res.Diags.Sorted() {
		if d.Code == "key-length-capped" {
			capped = append(capped, d.String())
		}
	}
	if len(capped) != 1 || !strings.Contains(capped[0], "POST /transfers") || !strings.Contains(capped[0], "maxLength 10000") ||
		!strings.Contains(capped[0], "the request header size common proxies accept") {
		t.Errorf("key-length-capped warnings: %v", capped)
	}
	// The hint says where to set key.maxLength, and to what, in both places that can.
	for _, w := range []string{"set key.maxLength to 8192 (or less)", "x-idempotent: {key: {maxLength: 8192}}", "idemgen.yaml:\n      operations:\n        \"createTransfer\":\n          key: {maxLength: 8192}"} {
		if len(capped) == 1 && !strings.Contains(capped[0], w) {
			t.Errorf("key-length-capped hint lacks %q:\n%s", w, capped[0])
		}
	}
	// Marked by the config (the user's own rules), the default minimum applies.
	res = load(t, Options{Path: path, ConfigPath: writeFile(t, "idemgen.yaml", "version: 1\noperations:\n  createPayment: true\n")})
	k := res.Doc.Operations[0].Settings.Key
	if k.MinLength != 16 || k.Sources.MinLength != model.RuleDefault || k.Sources.Required != model.RuleSpec {
		t.Errorf("config-marked key %+v", k)
	}
}

// TestKeySyntaxAndBodySettings: key.characters, key.quoted and key.echo, and body.nulls and
// body.unknown, are read from x-idempotent, the document's x-idempotency and the config file,
// field by field like every setting; their defaults are visible, accept, no echo, schema and
// schema; a value outside its set is a located error naming the setting.
func TestKeySyntaxAndBodySettings(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
x-idempotency:
  key: {characters: opaque}
paths:
  /a:
    post:
      operationId: a
      x-idempotent: {key: {quoted: require, echo: true, minLength: 1}, body: {nulls: clear}}
      responses: {"201": {description: ok}}
  /b:
    post:
      operationId: b
      x-idempotent: {body: {unknown: accept}}
      responses: {"201": {description: ok}}
`
	res := load(t, Options{Path: writeFile(t, "openapi.yaml", spec)})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatal(errs)
	}
	a, b := res.Doc.Operations[0].Settings, res.Doc.Operations[1].Settings
	if a.Key.Characters != "opaque" || a.Key.Quoted != "require" || !a.Key.Echo || a.Body.Nulls != model.NullsClear || a.Body.Unknown != model.UnknownSchema {
		t.Errorf("a: key %+v, body %+v", a.Key, a.Body)
	}
	if b.Key.Characters != "opaque" || b.Key.Quoted != "accept" || b.Key.Echo || b.Body.Nulls != model.NullsSchema || b.Body.Unknown != model.UnknownAccept {
		t.Errorf("b: key %+v, body %+v", b.Key, b.Body)
	}
	cfg := "version: 1\ndefaults:\n  key: {quoted: literal}\noperations:\n  b: {key: {characters: visible}}\n"
	res = load(t, Options{Path: writeFile(t, "openapi.yaml", spec), ConfigPath: writeFile(t, "idemgen.yaml", cfg)})
	if b := res.Doc.Operations[1].Settings.Key; b.Characters != "visible" || b.Quoted != "literal" {
		t.Errorf("config: b's key %+v", b)
	}
	bad := strings.NewReplacer("quoted: require", "quoted: always", "unknown: accept", "unknown: ignore").Replace(spec)
	res = load(t, Options{Path: writeFile(t, "openapi.yaml", bad)})
	var got []string
	for _, d := range errorsOf(res.Diags) {
		got = append(got, d.Loc.Pointer+" "+d.Message)
	}
	want := []string{
		`/paths/~1a/post/x-idempotent/key/quoted key.quoted: "always" is not one of accept, require, literal`,
		`/paths/~1b/post/x-idempotent/body/unknown body.unknown: "ignore" is not one of schema, accept`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
