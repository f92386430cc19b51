package generator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
)

// loadStripe loads Stripe's spec with every POST marked by a config file written by
// bench/generate/mark-all-posts.sh.
func loadStripe(b testing.TB) (*model.Document, spec.Options) {
	b.Helper()
	path := filepath.Join("..", "testdata", "specs", "vendor", "stripe-spec3.yaml")
	if _, err := os.Stat(path); err != nil {
		b.Skip("stripe-spec3.yaml not in testdata/specs/vendor")
	}
	cfg := filepath.Join(b.TempDir(), "stripe.yaml")
	out, err := exec.Command("../bench/generate/mark-all-posts.sh", path).Output()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfg, out, 0o644); err != nil {
		b.Fatal(err)
	}
	opts := spec.Options{Path: path, ConfigPath: cfg}
	res, err := spec.Load(context.Background(), opts)
	if err != nil || res.Diags.HasErrors() {
		b.Fatalf("load: %v %v", err, res.Diags.Err())
	}
	return res.Doc, opts
}

// BenchmarkStripe compares generation (model to files) and Diagnose (model to the generator's
// errors, no files) with their baseline in the same run, loading the same spec (file to model):
// go test ./generator -run x -bench Stripe -benchmem.
func BenchmarkStripe(b *testing.B) {
	doc, opts := loadStripe(b)
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			if _, err := spec.Load(context.Background(), opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generate", func(b *testing.B) {
		for b.Loop() {
			if _, err := Generate(doc, Options{Package: "stripe"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What idemgen check and list add to loading: the generator's verdict, without its files.
	b.Run("diagnose", func(b *testing.B) {
		for b.Loop() {
			var d diag.List
			Diagnose(doc, &d)
			if d.HasErrors() {
				b.Fatal(d.Err())
			}
		}
	})
}
