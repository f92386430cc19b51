package spec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// TestConfigDiagnostics: config problems are errors located in the config file.
func TestConfigDiagnostics(t *testing.T) {
	cases := []struct {
		name    string
		config  string
		code    string
		line    int
		pointer string
	}{
		{name: "unknown top-level field", config: "version: 1\noperation:\n  createPayment: true\n", code: "unknown-field", line: 2, pointer: "/operation"},
		{name: "version not a number", config: "version: \"1\"\n", code: "config-invalid", line: 1, pointer: "/version"},
		{name: "top-level field twice", config: "version: 1\ndefaults: {}\ndefaults: {lease: 1m}\n", code: "config-invalid", line: 3, pointer: "/defaults"},
		{name: "not a map", config: "[version]\n", code: "wrong-type", line: 1},
		{name: "missing version", config: "operations:\n  createPayment: true\n", code: "config-invalid", line: 1},
		{name: "future version", config: "version: 2\n", code: "config-invalid", line: 1, pointer: "/version"},
		{name: "unknown operation", config: "version: 1\noperations:\n  createPaymnet: true\n", code: "config-unknown-operation", line: 3, pointer: "/operations/createPaymnet"},
		{name: "unknown route", config: "version: 1\noperations:\n  POST /payment: true\n", code: "config-unknown-operation", line: 3, pointer: "/operations/POST ~1payment"},
		{name: "bad selector", config: "version: 1\noperations:\n  FETCH /payments: true\n", code: "config-invalid", line: 3, pointer: "/operations/FETCH ~1payments"},
		{name: "same operation twice", config: "version: 1\noperations:\n  createPayment: true\n  post /payments: {retention: 1h}\n", code: "config-duplicate", line: 4, pointer: "/operations/post ~1payments"},
		{name: "bad duration in entry", config: "version: 1\noperations:\n  createPayment:\n    retention: soon\n", code: "bad-duration", line: 4, pointer: "/operations/createPayment/retention"},
		{name: "unknown field in entry", config: "version: 1\noperations:\n  createPayment:\n    key:\n      hedaer: X-Key\n", code: "unknown-field", line: 5, pointer: "/operations/createPayment/key/hedaer"},
		{name: "empty statuses in entry", config: "version: 1\noperations:\n  createPayment:\n    replay: {statuses: []}\n", code: "bad-value", line: 4, pointer: "/operations/createPayment/replay/statuses"},
		{name: "empty statuses in defaults", config: "version: 1\ndefaults:\n  replay:\n    statuses: []\n", code: "bad-value", line: 4, pointer: "/defaults/replay/statuses"},
		{name: "unknown field in defaults", config: "version: 1\ndefaults:\n  retain: 1h\n", code: "unknown-field", line: 3, pointer: "/defaults/retain"},
		{name: "exclude matching nothing", config: "version: 1\noperations:\n  createPayment:\n    fingerprint:\n      exclude: [/amount, /nope]\n", code: "exclude-matches-nothing", line: 5, pointer: "/operations/createPayment/fingerprint/exclude/1"},
		{name: "mark on GET", config: "version: 1\noperations:\n  GET /payments: true\n", code: "safe-method", line: 3, pointer: "/operations/GET ~1payments"},
		{name: "operations not a map", config: "version: 1\noperations: [createPayment]\n", code: "wrong-type", line: 2, pointer: "/operations"},
		{name: "db not a string", config: "version: 1\ndb: [DBTX]\n", code: "wrong-type", line: 2, pointer: "/db"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specPath := writeSpec(t, "false", "", "", "")
			cfg := writeFile(t, "idemgen.yaml", tc.config)
			res := load(t, Options{Path: specPath, ConfigPath: cfg})
			errs := errorsOf(res.Diags)
			if len(errs) != 1 {
				t.Fatalf("want one error %s, got %d:\n%s", tc.code, len(errs), (&diag.Errors{List: errs}).Error())
			}
			d := errs[0]
			if d.Code != tc.code || d.Loc.File != cfg || d.Loc.Line != tc.line || d.Loc.Pointer != tc.pointer {
				t.Errorf("got %s\nwant %s at %s:%d (at #%s)", d, tc.code, cfg, tc.line, tc.pointer)
			}
		})
	}
}

// TestConfigDB: the config's db reaches the model as written, located, for the generator to
// parse.
func TestConfigDB(t *testing.T) {
	specPath := writeSpec(t, "true", "", "", "")
	cfg := writeFile(t, "idemgen.yaml", "version: 1\ndb: \"*example.com/shop/store.DB\"\n")
	res := load(t, Options{Path: specPath, ConfigPath: cfg})
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags.Err())
	}
	if d := res.Doc; d.DB != "*example.com/shop/store.DB" || d.DBLoc.File != cfg || d.DBLoc.Line != 2 || d.DBLoc.Pointer != "/db" {
		t.Errorf("db %q at %v", d.DB, d.DBLoc)
	}
}

// TestConfigUnknownTopLevelFields: each unknown top-level field is its own located error, with
// the known field it is closest to, like an unknown field inside the settings.
func TestConfigUnknownTopLevelFields(t *testing.T) {
	specPath := writeSpec(t, "false", "", "", "")
	cfg := writeFile(t, "idemgen.yaml", "version: 1\noperation:\n  createPayment: true\nmarks: {}\n")
	res := load(t, Options{Path: specPath, ConfigPath: cfg})
	errs := errorsOf(res.Diags)
	var got []string
	for _, d := range errs {
		got = append(got, fmt.Sprintf("%d:%d %s %s %s", d.Loc.Line, d.Loc.Column, d.Code, d.Loc.Pointer, d.Message))
	}
	want := []string{
		`2:1 unknown-field /operation unknown config field "operation"; did you mean "operations"?`,
		`4:1 unknown-field /marks unknown config field "marks" (known: version, defaults, operations, only, unsafe, stainless, refs, db)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSettingsPrecedence: built-in defaults < document x-idempotency < config defaults <
// the operation's x-idempotent < its config entry, field by field.
func TestSettingsPrecedence(t *testing.T) {
	specPath := writeSpec(t, `{retention: 2h, mode: lease}`, "", `{retention: 1h, lease: 10s, scope: operation}`, "")
	cfg := writeFile(t, "idemgen.yaml", `version: 1
defaults:
  lease: 20s
  limits: {body: 2MiB}
operations:
  createPayment:
    retention: 3h
`)
	res := load(t, Options{Path: specPath, ConfigPath: cfg})
	ds := res.Diags.Sorted()
	// The only diagnostic: the default key header is not declared, but the body has an
	// idempotency_key property, so the warning suggests it.
	if len(ds) != 1 || ds[0].Code != "key-not-declared" || ds[0].Severity != diag.Warning || !strings.Contains(ds[0].Hint, `key: {body: "/idempotency_key"}`) {
		t.Fatalf("diagnostics: %v", ds)
	}
	op := res.Doc.Operations[0]
	s := op.Settings
	if op.Mark != model.MarkConfig {
		t.Errorf("mark %q, want config", op.Mark)
	}
	if s.Retention != 3*time.Hour || s.Mode != model.ModeLease || s.Lease != 20*time.Second || s.Scope != model.ScopeOperation || s.BodyLimit != 2<<20 || s.ResponseLimit != 1<<20 {
		t.Errorf("settings %+v", s)
	}
	if s.Loc.File != cfg || s.Loc.Line != 6 {
		t.Errorf("settings located at %s, want the config entry %s:6", s.Loc, cfg)
	}
}

// TestConfigUnmarks: a config entry `false` removes a mark the vendor spec carries.
func TestConfigUnmarks(t *testing.T) {
	specPath := writeSpec(t, "true", "", "", "")
	cfg := writeFile(t, "idemgen.yaml", "version: 1\noperations:\n  POST /payments: false\n")
	res := load(t, Options{Path: specPath, ConfigPath: cfg})
	if res.Diags.Len() != 0 || len(res.Doc.Operations) != 0 || len(res.Doc.Unmarked) != 2 {
		t.Fatalf("diags %v, %d marked, %d unmarked", res.Diags.Sorted(), len(res.Doc.Operations), len(res.Doc.Unmarked))
	}
}
