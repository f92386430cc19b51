package generator

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStripeEveryPost generates Stripe's whole spec with every POST marked (222 operations)
// and type-checks the package with go vet, so that no schema feature of the
// largest vendor spec can make generated code stop compiling. It runs in -short mode too: the
// package's dependencies come from the build cache and vet type-checks it without compiling
// it, about 10 s of CPU time. `make bench-stripe` measures what building it costs.
func TestStripeEveryPost(t *testing.T) {
	start := time.Now()
	doc, _ := loadStripe(t)
	if n := len(doc.Operations); n != 222 {
		t.Errorf("%d operations marked, want 222", n)
	}
	files, err := Generate(doc, Options{Package: "stripeall"})
	if err != nil {
		t.Fatal(err)
	}
	// Inside the module, for the runtime import; "_" keeps it out of ./... .
	dir, err := os.MkdirTemp("..", "_idemgen-stripeall-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if _, err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	generated := time.Since(start)
	cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	t.Logf("loaded and generated in %.1fs, vetted in %.1fs", generated.Seconds(), (time.Since(start) - generated).Seconds())
}
