package generator

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/spec"
)

// TestVendorSpecs runs the whole pipeline on real vendor specs (testdata/specs/vendor, sources
// and licences in testdata/specs/INDEX.md) as `idemgen check --infer` does: load, then the
// generator's own checks (Diagnose). It pins, per spec, the operations found and the errors and
// warnings by code, so a change in what idemgen accepts shows up here; every error must be a
// located diagnostic, never an internal error. Each spec without errors is generated, built,
// vetted and mounted, so a spec feature real APIs use can never produce code that does not
// compile. The output goes to a temporary folder inside the module (its name starts with "_",
// so ./... never picks it up) because generated code imports the module's runtime.
func TestVendorSpecs(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and compiles about 60k lines")
	}
	removeStaleVendorDirs(t)
	root, err := os.MkdirTemp("..", vendorDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanup runs after a failure too; a run killed before it (a -timeout panic, a signal)
	// leaves the folder, which .gitignore keeps out of commits and the next run removes.
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("removing %s: %v", root, err)
		}
	})
	// Twilio again with every POST marked (62 operations, most on paths like
	// /Accounts/{AccountSid}/Calls/{Sid}.json that ServeMux patterns cannot express).
	twilioAll := filepath.Join(root, "twilio-all-posts.yaml")
	out, err := exec.Command("../bench/generate/mark-all-posts.sh", "../testdata/specs/vendor/twilio-api-v2010.yaml").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(twilioAll, out, 0o644); err != nil {
		t.Fatal(err)
	}
	// Square with its two defects repaired (the missing schema CatalogModifierToggleOverrideType,
	// the undeclared path parameter of UpdateVendor), so that the rest of it, 66 operations
	// including four multipart uploads keyed inside their JSON part, is generated and built.
	squareFixed := filepath.Join(root, "square-fixed.json")
	if err := writeFixedSquare(squareFixed); err != nil {
		t.Fatal(err)
	}
	type codes = map[string]int
	// Square's CreateCustomerCard is idempotent on its card_nonce, and its three bulk creates,
	// five bulk upserts and bulk update key each item: check says so.
	squareWarnings := codes{"described-idempotency-key": 1, "item-idempotency-keys": 9}
	specs := []struct {
		name, file, config string
		ops                int // -1: the document cannot be read
		errors, warnings   codes
	}{
		{"adyen", "adyen-checkout-v71.json", "", 22, nil, codes{"errors-inferred": 17}}, // ServiceError: the inferred errors mapping generates and builds
		{"paypal", "paypal-payments-v2.json", "", 3, nil, codes{"errors-schema-inline": 3}},
		{"coinbase", "coinbase-cdp.yaml", "", 66, nil, codes{"errors-not-inferred": 66}},
		{"twilio", "twilio-api-v2010.yaml", "", 4, nil, nil},
		{"twilioall", "twilio-api-v2010.yaml", twilioAll, 62, nil, codes{"key-not-declared": 4}},
		{"svix", "svix-server-openapi.json", "", 10, nil, codes{"duplicate-operation-id": 1, "errors-inferred": 9}},
		{"dwolla", "dwolla-openapi.yml", "", 2, nil, codes{"errors-inferred": 1, "errors-schema-inline": 1}},
		{"resend", "resend.yaml", "", 2, nil, nil}, // its keys' maxLength 256 is taken as declared
		{"stripe", "stripe-spec3.yaml", "", 0, nil, nil},
		{"petstore", "swagger-petstore-v3.yaml", "", 0, nil, nil},
		{"azuresms", "azure-communication-sms-2021-03-07.json", "", 0, nil, codes{"item-idempotency-keys": 1}},
		{"obie", "obie-payment-initiation-v4.yaml", "", 15, nil, codes{"errors-inferred": 15}}, // JSON beside application/jose+jwe on every keyed operation
		// Specs that fail, each with true, located errors naming the limitation.
		{"mollie", "mollie-api.yaml", "", 49, nil, codes{"errors-not-inferred": 49}},                                                                           // oneOf path parameters (strings), lookahead patterns: generates and builds
		{"lob", "lob-api-bundled.yml", "", 6, codes{"ref-not-allowed": 52, "unsupported-schema": 5}, codes{"errors-not-inferred": 6, "second-key-carrier": 6}}, // content: {$ref}; nested form fields beside JSON (multipart is decoded); the key in the header or the query
		{"square", "square-connect-v2-oas3-2025-05-21.json", "", 66, codes{"dangling-ref": 5, "bad-path": 1}, squareWarnings},
		{"squarefixed", squareFixed, "", 66, nil, squareWarnings},
		{"azurechat", "azure-communication-chat-2021-03-07.json", "", 1, codes{"ref-outside-root": 6}, codes{"errors-not-inferred": 1}},
		{"unit", "unit-openapi/openapi.json", "", -1, codes{"wrong-ref-kind": 45, "dangling-ref": 1, "load-failed": 1}, nil},
		// Round three's small specs (internal/spec TestRoundThree pins how each loads): each
		// generates and builds.
		{"r3contenttype", round3 + "content-type-header.yaml", "", 1, nil, nil},
		{"r3openbanking", round3 + "open-banking.yaml", "", 2, nil, nil},
		{"r3requestid", round3 + "request-id-wording.yaml", "", 2, nil, nil},
		{"r3unsafe", round3 + "treasury.yaml", round3 + "treasury.unsafe.yaml", 6, nil, nil},
		{"r3annotations", round3 + "annotations.yaml", round3 + "annotations.config.yaml", 2, nil, codes{"retries-without-key": 1}},
		{"r3remoteref", round3 + "remote-ref.yaml", round3 + "remote-ref.config.yaml", 1, nil, nil},
		{"r3wrongtype", round3 + "wrong-type.yaml", round3 + "annotations.config.yaml", 1, codes{"wrong-type": 1}, nil},
		// Round four: LINE's retry-keyed operations marked by config; Google's AIP-155 requestId
		// in the query of Swagger 2.0 documents, inferred.
		{"line", "line-messaging-api.yml", "../testdata/config/line.yaml", 4, nil, codes{"errors-inferred": 4}}, // its ErrorResponse schema
		{"gtesting", "google-testing-v1.json", "", 1, nil, nil},
		{"gdrive", "google-drive-v3.json", "", 1, nil, nil},
	}
	var pkgs []string
	for _, sp := range specs {
		s := sp.name
		path := filepath.Join("..", "testdata", "specs", "vendor", sp.file)
		if filepath.IsAbs(sp.file) || strings.HasPrefix(sp.file, "..") {
			path = sp.file
		}
		res, err := spec.Load(context.Background(), spec.Options{Path: path, ConfigPath: sp.config, Infer: sp.config == ""})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		Diagnose(res.Doc, res.Diags)
		errs, warns := map[string]int(nil), map[string]int(nil)
		for _, d := range res.Diags.Sorted() {
			m := &errs
			if d.Severity == diag.Warning {
				m = &warns
			}
			if *m == nil {
				*m = map[string]int{}
			}
			(*m)[d.Code]++
			if d.Severity == diag.Error && (d.Code == "internal-error" || d.Loc.Line == 0 && d.Loc.Pointer == "") {
				t.Errorf("%s: an error without a location: %s", s, d)
			}
		}
		ops := -1
		if res.Doc != nil {
			ops = len(res.Doc.Operations)
		}
		if ops != sp.ops || !maps.Equal(errs, sp.errors) || !maps.Equal(warns, sp.warnings) {
			t.Errorf("%s: %d operations, errors %v, warnings %v; want %d, %v, %v", s, ops, errs, warns, sp.ops, sp.errors, sp.warnings)
		}
		if res.Diags.HasErrors() || ops <= 0 {
			continue
		}
		files, err := Generate(res.Doc, Options{Package: s, Docs: true})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		dir := filepath.Join(root, s)
		if _, err := Write(dir, files); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "register_test.go"), []byte(strings.ReplaceAll(registerTest, "PKG", s)), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(filepath.Join(filepath.Base(root), s)))
		t.Logf("%s: %d operations", s, ops)
	}
	for _, args := range [][]string{{"build"}, {"vet"}, {"test", "-v", "-run", "TestRegisterMountsEveryOperation"}} {
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go %s: %v\n%s", args[0], err, out)
		}
		if args[0] == "test" {
			if n := strings.Count(string(out), "--- PASS: TestRegisterMountsEveryOperation"); n != len(pkgs) {
				t.Errorf("Register test passed in %d of %d packages:\n%s", n, len(pkgs), out)
			}
		}
	}
}

// round3 holds the small specs of the third real-spec round.
const round3 = "../testdata/specs/round3/"

// vendorDirPrefix starts the name of TestVendorSpecs's temporary folder in the module's root.
const vendorDirPrefix = "_idemgen-vendor-"

// removeStaleVendorDirs removes the temporary folders of earlier runs that were killed before
// their cleanup: those not written to for an hour (a run takes minutes, so a live one is never
// touched).
func removeStaleVendorDirs(t *testing.T) {
	stale, err := filepath.Glob(filepath.Join("..", vendorDirPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range stale {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			if err := os.RemoveAll(dir); err != nil {
				t.Logf("a stale folder of an earlier run stays: %v", err)
			}
		}
	}
}

// writeFixedSquare writes Square's spec with its two defects repaired to path.
func writeFixedSquare(path string) error {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "specs", "vendor", "square-connect-v2-oas3-2025-05-21.json"))
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	doc["components"].(map[string]any)["schemas"].(map[string]any)["CatalogModifierToggleOverrideType"] = map[string]any{"type": "string"}
	put := doc["paths"].(map[string]any)["/v2/vendors/{vendor_id}"].(map[string]any)["put"].(map[string]any)
	put["parameters"] = []any{map[string]any{"name": "vendor_id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}}
	fixed, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, fixed, 0o644)
}

// registerTest is written into every vendor package: it mounts every operation (a handler for
// each Handlers field, made by reflection) on a real ServeMux, which must not fail, and checks
// that the path template of every operation routes to a handler.
const registerTest = `package PKG

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func TestRegisterMountsEveryOperation(t *testing.T) {
	var h Handlers
	hv := reflect.ValueOf(&h).Elem()
	for i := 0; i < hv.NumField(); i++ {
		f := hv.Field(i)
		f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value { panic("not called") }))
	}
	// The pool connects lazily: nothing here reaches a database.
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := Register(mux, rt, h); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile("{[^}]*}")
	ops := Operations()
	for _, op := range ops {
		r := httptest.NewRequest(op.Method, param.ReplaceAllString(op.Path, "v1"), nil)
		if _, pattern := mux.Handler(r); pattern == "" {
			t.Errorf("%s %s does not route", op.Method, op.Path)
		}
	}
	t.Logf("%d operations mounted", len(ops))
}
`
