package conformance

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/spec"
)

// TestGeneratedCodeIsCurrent regenerates, in memory, each generated package this end-to-end
// proof relies on, from the go:generate line next to it, and fails when the committed files
// differ: the cases and the example must run the code idemgen produces today, not an old copy.
// (The service's own API is golden/conformance, which TestGolden in ./generator checks.)
func TestGeneratedCodeIsCurrent(t *testing.T) {
	for _, g := range []struct{ src, pkg string }{
		{"../../../examples/petstore/main.go", "examples/petstore"},
	} {
		src := g.src
		t.Run(g.pkg, func(t *testing.T) {
			args := goGenerateArgs(t, src)
			dir := filepath.Dir(src)
			var specPath, out, pkg string
			var opts generator.Options
			var sql bool
			for i := 0; i < len(args); i++ {
				switch a := args[i]; {
				case a == "--out" && i+1 < len(args):
					i++
					out = filepath.Join(dir, args[i])
				case a == "--package" && i+1 < len(args):
					i++
					pkg = args[i]
				case a == "--docs":
					opts.Docs = true
				case a == "--sql":
					sql = true
				case strings.HasPrefix(a, "-"):
					t.Fatalf("%s: go:generate flag %s is not understood by this test", src, a)
				default:
					specPath = filepath.Join(dir, a)
				}
			}
			if specPath == "" || out == "" || pkg == "" {
				t.Fatalf("%s: go:generate line %q lacks the spec, --out or --package", src, args)
			}
			opts.Package = pkg
			res, err := spec.Load(context.Background(), spec.Options{Path: specPath})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Diags.Err(); err != nil {
				t.Fatalf("%s: %v", specPath, err)
			}
			files, err := generator.Generate(res.Doc, opts)
			if err != nil {
				t.Fatal(err)
			}
			if sql { // the PostgreSQL store's schema: the line names no other store's handle (--db)
				if files[generator.FileSQL], err = generator.SQL(); err != nil {
					t.Fatal(err)
				}
			}
			changes, err := generator.Check(out, files)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				t.Errorf("%s/%s is stale (would %s): run go generate ./%s and commit the result",
					g.pkg, filepath.ToSlash(filepath.Join(filepath.Base(out), c.Name)), c.Op, g.pkg)
			}
		})
	}
}

// goGenerateArgs returns the arguments after `idemgen generate` on src's go:generate line.
func goGenerateArgs(t *testing.T, src string) []string {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "//go:generate ") {
			continue
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if strings.HasSuffix(f, "cmd/idemgen") && i+1 < len(fields) && fields[i+1] == "generate" {
				return fields[i+2:]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s has no go:generate line running idemgen generate", src)
	return nil
}
