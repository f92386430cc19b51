package generator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/spec"
)

// TestVendorSpecs runs the whole pipeline (load with --infer, generate, write) on real vendor
// specs (testdata/specs/vendor, see its NOTICE.md for sources and licences) and builds and vets
// the result, so a spec feature that real APIs use can never produce code that does not
// compile. The output goes to a temporary folder inside the module (its name starts with "_",
// so ./... never picks it up) because generated code imports the module's runtime.
func TestVendorSpecs(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and compiles about 50k lines")
	}
	root, err := os.MkdirTemp("..", "_idemgen-vendor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
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
	specs := []struct{ name, file, config string }{
		{"adyen", "adyen-checkout-v71.json", ""},
		{"paypal", "paypal-payments-v2.json", ""},
		{"coinbase", "coinbase-cdp.yaml", ""},
		{"twilio", "twilio-api-v2010.yaml", ""},
		{"twilioall", "twilio-api-v2010.yaml", twilioAll},
		{"svix", "svix-server-openapi.json", ""},
	}
	var pkgs []string
	for _, sp := range specs {
		s := sp.name
		path := filepath.Join("..", "testdata", "specs", "vendor", sp.file)
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: %v (the loader's corpus should hold it)", s, err)
		}
		res, err := spec.Load(context.Background(), spec.Options{Path: path, ConfigPath: sp.config, Infer: sp.config == ""})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if err := res.Diags.Err(); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if len(res.Doc.Operations) == 0 {
			t.Fatalf("%s: --infer marked no operation", s)
		}
		pkg := s
		files, err := Generate(res.Doc, Options{Package: pkg, Docs: true})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		dir := filepath.Join(root, pkg)
		if _, err := Write(dir, files); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "register_test.go"), []byte(strings.ReplaceAll(registerTest, "PKG", pkg)), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(filepath.Join(filepath.Base(root), pkg)))
		t.Logf("%s: %d operations", s, len(res.Doc.Operations))
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

// registerTest is written into every vendor package: it mounts every operation (a handler for
// each Handlers field, made by reflection) on a real ServeMux, which must not fail, and checks
// that the path template of every operation routes to a handler.
const registerTest = `package PKG

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"testing"

	"github.com/idemgen/idemgen/runtime"
)

func TestRegisterMountsEveryOperation(t *testing.T) {
	var h Handlers
	hv := reflect.ValueOf(&h).Elem()
	for i := 0; i < hv.NumField(); i++ {
		f := hv.Field(i)
		f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value { panic("not called") }))
	}
	mux := http.NewServeMux()
	if err := Register(mux, &runtime.Runtime{}, h); err != nil {
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
