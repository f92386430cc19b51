package generator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	specs := []string{
		"adyen-checkout-v71.json",
		"paypal-payments-v2.json",
		"coinbase-cdp.yaml",
		"twilio-api-v2010.yaml",
		"svix-server-openapi.json",
	}
	root, err := os.MkdirTemp("..", "_idemgen-vendor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	var pkgs []string
	for _, s := range specs {
		path := filepath.Join("..", "testdata", "specs", "vendor", s)
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: %v (the loader's corpus should hold it)", s, err)
		}
		res, err := spec.Load(context.Background(), spec.Options{Path: path, Infer: true})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if err := res.Diags.Err(); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if len(res.Doc.Operations) == 0 {
			t.Fatalf("%s: --infer marked no operation", s)
		}
		pkg := packageName(s[:len(s)-len(filepath.Ext(s))])
		files, err := Generate(res.Doc, Options{Package: pkg, Docs: true})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		dir := filepath.Join(root, pkg)
		if _, err := Write(dir, files); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(filepath.Join(filepath.Base(root), pkg)))
		t.Logf("%s: %d operations", s, len(res.Doc.Operations))
	}
	for _, args := range [][]string{{"build"}, {"vet"}} {
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s: %v\n%s", args[0], err, out)
		}
	}
}
