package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// TestConfigJSONSchemaAgreesWithDecoder: docs/config.schema.json (for editors) accepts exactly
// the configs the strict decoder accepts, so the two cannot drift apart unnoticed.
func TestConfigJSONSchemaAgreesWithDecoder(t *testing.T) {
	c := jsonschema.NewCompiler()
	raw, err := os.ReadFile("../../docs/config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatal(err)
	}

	full := `version: 1
defaults: {retention: 72h, key: {header: X-Request-Id, required: false, minLength: 8, maxLength: 64, pattern: "^[a-z]+$"}}
operations:
  createPayment:
    scope: operation
    mode: lease
    lease: 1m30s
    fingerprint: {exclude: [/metadata/trace_id, "/lines/*/note"], headers: [X-Account], body: canonical}
    replay: {headers: [X-Request-Id], statuses: [201, 4xx, "!409"]}
    concurrency: {wait: 0s}
    limits: {body: 64KiB, response: 1048576}
  GET /payments: false
db: "*example.com/shop/store.DB"
`
	cases := []struct {
		name, config string
		valid        bool
	}{
		{"every field", full, true},
		{"minimal", "version: 1\n", true},
		{"errors mapping", "version: 1\ndefaults:\n  errors:\n    formats: [{schema: '#/components/schemas/E', body: {code: '{name}'}}]\n    problems: {in-flight: {status: 409, headers: {X-Retry: 'yes'}, body: {code: busy}}}\n", true},
		{"errors: unknown problem", "version: 1\ndefaults: {errors: {formats: [{schema: '#/x', body: {}}], problems: {in-flite: {status: 409}}}}\n", false},
		{"errors without formats", "version: 1\ndefaults: {errors: {problems: {}}}\n", false},
		{"mark with true", "version: 1\noperations: {createPayment: true}\n", true},
		{"missing version", "operations: {createPayment: true}\n", false},
		{"version 2", "version: 2\n", false},
		{"unknown top-level field", "version: 1\nmarks: {}\n", false},
		{"unknown settings field", "version: 1\noperations: {createPayment: {retain: 1h}}\n", false},
		{"unknown key field", "version: 1\ndefaults: {key: {name: X}}\n", false},
		{"bad mode", "version: 1\ndefaults: {mode: lazy}\n", false},
		{"bad duration", "version: 1\ndefaults: {retention: 1 day}\n", false},
		{"duration as number", "version: 1\ndefaults: {lease: 30}\n", false},
		{"bad size", "version: 1\ndefaults: {limits: {body: 1MB}}\n", false},
		{"header and body", "version: 1\ndefaults: {key: {header: X, body: /k}}\n", false},
		{"query key", "version: 1\ndefaults: {key: {query: request_id, required: false}}\n", true},
		{"query and header", "version: 1\ndefaults: {key: {query: request_id, header: X}}\n", false},
		{"query and body", "version: 1\ndefaults: {key: {query: request_id, body: /k}}\n", false},
		{"empty query", "version: 1\ndefaults: {key: {query: \"\"}}\n", false},
		{"length out of range", "version: 1\ndefaults: {key: {maxLength: 8193}}\n", false},
		{"bad status class", "version: 1\ndefaults: {replay: {statuses: [6xx]}}\n", false},
		{"empty statuses", "version: 1\ndefaults: {replay: {statuses: []}}\n", false},
		{"required as string", "version: 1\ndefaults: {key: {required: \"no\"}}\n", false},
		{"db as a map", "version: 1\ndb: {type: DBTX}\n", false},
		{"empty db", "version: 1\ndb: \"\"\n", false},
		{"only and patterns", "version: 1\nonly: [createPayment, \"POST /pay*\"]\noperations: {\"* /payments\": false}\n", true},
		{"only not a list", "version: 1\nonly: createPayment\n", false},
		{"unsafe", "version: 1\nunsafe: {retention: 1h}\n", true},
		{"unsafe not a switch", "version: 1\nunsafe: all\n", false},
		{"stainless", "version: 1\nstainless: {idempotency_header: Idempotency-Key}\n", true},
		{"stainless without a header", "version: 1\nstainless: {}\n", false},
		{"refs", "version: 1\nrefs: {\"https://example.com/schemas/\": schemas/}\n", true},
		{"refs not a URL", "version: 1\nrefs: {schemas.yaml: copy.yaml}\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := yaml.Unmarshal([]byte(tc.config), &v); err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(v)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
			if err != nil {
				t.Fatal(err)
			}
			schemaOK := sch.Validate(inst) == nil

			specPath := writeSpec(t, "false", "", "", "")
			cfg := writeFile(t, "idemgen.yaml", tc.config)
			decoderOK := !load(t, Options{Path: specPath, ConfigPath: cfg}).Diags.HasErrors()
			if schemaOK != tc.valid || decoderOK != tc.valid {
				t.Errorf("want valid=%v; JSON Schema says %v, decoder says %v", tc.valid, schemaOK, decoderOK)
			}
		})
	}

	// The example configs in testdata validate too.
	files, _ := filepath.Glob("../../testdata/config/*.yaml")
	for _, f := range files {
		if strings.HasSuffix(f, ".overlay.yaml") {
			continue // an OpenAPI Overlay, not a config
		}
		data, _ := os.ReadFile(f)
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		js, _ := json.Marshal(v)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(js))
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s does not validate: %v", f, err)
		}
	}
}
