package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// TestInferenceRules pins what --infer takes as a key in testdata/specs/infer/rules.yaml (the
// rules and their evidence are in docs/cli.md): the OASIS and AIP-155 standards, vendor header
// spellings; not a request_id without evidence, nor a field that names another request's key;
// other spellings are a warning only.
func TestInferenceRules(t *testing.T) {
	res := load(t, Options{Path: "../../testdata/specs/infer/rules.yaml", Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatal(errs)
	}
	type key struct {
		carrier         model.Carrier
		name, firstSent string
		std             model.Standard
	}
	want := map[string]key{
		"createCall":   {model.CarrierHeader, "Repeatability-Request-ID", "Repeatability-First-Sent", model.StandardRepeatable},
		"createBook":   {model.CarrierBody, "/request_id", "", model.StandardAIP155},
		"ckoPayment":   {model.CarrierHeader, "Cko-Idempotency-Key", "", model.StandardIdempotencyKey},
		"wiseTransfer": {model.CarrierHeader, "X-idempotence-uuid", "", model.StandardIdempotencyKey},
		"deleteSpoke":  {model.CarrierQuery, "requestId", "", model.StandardAIP155},
		"createLetter": {model.CarrierQuery, "idempotency_key", "", model.StandardIdempotencyKey},
	}
	got := map[string]key{}
	for _, op := range res.Doc.Operations {
		k := op.Settings.Key
		name := k.Header
		switch k.Carrier {
		case model.CarrierBody:
			name = k.Pointer
		case model.CarrierQuery:
			name = k.Query
		}
		got[op.ID] = key{k.Carrier, name, k.FirstSent, k.Standard}
	}
	if len(got) != len(want) {
		t.Errorf("inferred %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	warned := map[string]string{}
	for _, d := range res.Diags.Sorted() {
		warned[d.Loc.Pointer] = d.Code
	}
	for ptr, code := range map[string]string{"/paths/~1orders/post": "possible-idempotency-key", "/paths/~1tokens/post": "possible-idempotency-key"} {
		if warned[ptr] != code {
			t.Errorf("%s: %q, want %s", ptr, warned[ptr], code)
		}
	}
	for _, ptr := range []string{"/paths/~1payments~1cancel/post", "/paths/~1webhooks~1replay/post", "/paths/~1v1~1spokes~1{spoke}/patch"} {
		if c, ok := warned[ptr]; ok {
			t.Errorf("%s: unexpected %s", ptr, c)
		}
	}
}

// TestDescribedKeys: an unmarked operation whose header, query parameter or body field reads as
// its idempotency key from the spec's words (or, for a header, its name) gets one
// described-idempotency-key warning at that field, whose hint is a config entry and an overlay
// that mark it (each checked by marking the operation with it); under --infer nothing is marked
// from words, and the operations that carry no key get no warning.
func TestDescribedKeys(t *testing.T) {
	const path = "../../testdata/specs/infer/described.yaml"
	want := map[string]struct{ field, value string }{
		"POST /v2/bot/message/push": {"header", "X-Line-Retry-Key"},
		"POST /events":              {"body", "/event/transaction_id"},
		"POST /subscriptions":       {"body", "/external_id"},
		"POST /jobs":                {"body", "/deduplicationKey"},
		"POST /transfers":           {"body", "/externalId"},
		"POST /messages":            {"query", "externalID"},
		"POST /cards":               {"body", "/card_nonce"},
	}
	items := map[string]string{"POST /customers/bulk-create": "/customers", "POST /sms": "/recipients", "POST /attributes/bulk-upsert": "/values"}
	for _, infer := range []bool{false, true} {
		res := load(t, Options{Path: path, Infer: infer})
		if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 0 {
			t.Fatalf("infer=%v: errors %v, %d marked", infer, errs, len(res.Doc.Operations))
		}
		got := map[string]diag.Diagnostic{}
		gotItems := map[string]string{}
		for _, d := range res.Diags.Sorted() {
			route := strings.Join(strings.Fields(d.Message)[:2], " ")
			switch d.Code {
			case "described-idempotency-key":
				got[route] = d
			case "item-idempotency-keys":
				if d.Loc.Line == 0 || !strings.Contains(d.Hint, "{key: {required: false}}") {
					t.Errorf("%s", d)
				}
				gotItems[route] = d.Message
			default:
				t.Errorf("unexpected %s", d)
			}
		}
		for route, field := range items {
			if !strings.Contains(gotItems[route], "in body field "+field) {
				t.Errorf("infer=%v: %s: item keys %q, want in %s", infer, route, gotItems[route], field)
			}
		}
		if len(gotItems) != len(items) {
			t.Errorf("infer=%v: item-idempotency-keys %v, want %v", infer, gotItems, items)
		}
		for route, w := range want {
			d, ok := got[route]
			if !ok {
				t.Errorf("infer=%v: %s has no warning", infer, route)
				continue
			}
			if d.Loc.Line == 0 || !strings.Contains(d.Hint, fmt.Sprintf("key: {%s: %q", w.field, w.value)) || !strings.Contains(d.Hint, "overlay: 1.0.0") {
				t.Errorf("%s: %s", route, d)
			}
		}
		if len(got) != len(want) {
			t.Errorf("infer=%v: %d warnings, want %d", infer, len(got), len(want))
		}
		if infer {
			continue
		}
		// The hint's config entry marks the operation with that key, and so does its overlay.
		for route, d := range got {
			cfg, ov, _ := strings.Cut(d.Hint, "\nor in the spec (an overlay for a spec you do not own):\n")
			cfg = cfg[strings.Index(cfg, "operations:"):]
			for _, o := range []Options{
				{Path: path, ConfigPath: writeFile(t, "idemgen.yaml", "version: 1\n"+cfg+"\n")},
				{Path: path, Overlays: []string{writeFile(t, "mark.yaml", dedent(ov))}},
			} {
				res := load(t, o)
				if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 1 || res.Doc.Operations[0].Method+" "+res.Doc.Operations[0].Path != route {
					t.Errorf("%s: marking with the hint (%v): %v, %d marked", route, o.Overlays != nil, errs, len(res.Doc.Operations))
					continue
				}
				k := res.Doc.Operations[0].Settings.Key
				if name := k.Header + k.Pointer + k.Query; name != want[route].value {
					t.Errorf("%s: marked with key %s %s, want %s", route, k.Carrier, name, want[route].value)
				}
			}
		}
	}
}

// TestShapeKey: a key field only some shapes of a oneOf body declare (oneof-key.yaml's createNote)
// is not inferred, since a request in another shape has no key, but check warns, and the hint's
// config entry marks the operation with that key, optional.
func TestShapeKey(t *testing.T) {
	const path = "../../testdata/specs/oneof-key.yaml"
	var hint string
	for _, d := range load(t, Options{Path: path, Infer: true}).Diags.Sorted() {
		if d.Code == "possible-idempotency-key" {
			if !strings.HasPrefix(d.Message, "POST /v1/notes declares the body field /idempotency_key in some shapes") || hint != "" {
				t.Errorf("%s", d)
			}
			hint = d.Hint
		}
	}
	cfg, ok := strings.CutPrefix(hint[strings.Index(hint, "\n")+1:], "operations:")
	if !ok {
		t.Fatalf("hint %q has no config entry", hint)
	}
	res := load(t, Options{Path: path, ConfigPath: writeFile(t, "idemgen.yaml", "version: 1\noperations:"+cfg+"\n")})
	if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 1 {
		t.Fatalf("marked with the hint: %v, %d operations", errs, len(res.Doc.Operations))
	}
	if op := res.Doc.Operations[0]; op.ID != "createNote" || op.Settings.Key.Pointer != "/idempotency_key" || op.Settings.Key.Required {
		t.Errorf("%s marked with %+v", op.ID, op.Settings.Key)
	}
}

// dedent removes the two-space indent of a hint's block.
func dedent(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, strings.TrimPrefix(l, "  "))
	}
	return strings.Join(out, "\n") + "\n"
}

// TestSecondKeyCarrier: an operation that declares its key in a header and in the query (Lob:
// "an Idempotency-Key header or an idempotency_key query parameter") is read from one place, and
// check says which, at the other's declaration, with what a request keyed only there gets; the
// hint's other setting reads the query instead (and then names the header).
func TestSecondKeyCarrier(t *testing.T) {
	path := writeFile(t, "lob.yaml", `openapi: 3.0.3
info: {title: mail, version: "1"}
paths:
  /letters:
    post:
      operationId: createLetter
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string, maxLength: 256}}
        - {name: idempotency_key, in: query, schema: {type: string, maxLength: 256}}
      responses: {'200': {description: ok}}
`)
	for _, tc := range []struct {
		config, read, other, then string
		line                      int
	}{
		{"", "the Idempotency-Key header", "query parameter idempotency_key", "runs unguarded (the key is optional)", 9},
		{`{key: {query: idempotency_key, required: true}}`, "the query parameter idempotency_key", "header Idempotency-Key", "is refused (400 key-missing)", 8},
	} {
		opts := Options{Path: path, Infer: true}
		if tc.config != "" {
			opts.ConfigPath = writeFile(t, "idemgen.yaml", "version: 1\noperations:\n  createLetter: "+tc.config+"\n")
		}
		res := load(t, opts)
		var got []diag.Diagnostic
		for _, d := range res.Diags.Sorted() {
			if d.Code == "second-key-carrier" {
				got = append(got, d)
			}
		}
		if len(got) != 1 || len(res.Doc.Operations) != 1 {
			t.Fatalf("%q: %d operations, warnings %v", tc.config, len(res.Doc.Operations), got)
		}
		d := got[0]
		want := fmt.Sprintf("POST /letters reads its idempotency key from %s, and also declares the %s, which is not read as a key", tc.read, tc.other)
		if !strings.HasPrefix(d.Message, want) || !strings.HasSuffix(d.Message, tc.then) || d.Loc.Line != tc.line {
			t.Errorf("%q: %s\nwant %q … %q at line %d", tc.config, d, want, tc.then, tc.line)
		}
	}
}
