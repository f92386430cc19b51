package generator

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files under golden/")

// goldenCase is one input of testdata/specs: a spec file <case>.yaml|json, or a folder <case>/
// holding a split spec whose root is openapi.yaml. An optional <case>.config.yaml next to it is
// an idemgen config file.
type goldenCase struct {
	name, spec, config string
}

func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	const dir = "../testdata/specs"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenCase
	for _, e := range entries {
		n := e.Name()
		switch {
		case e.IsDir():
			if n == "vendor" || n == "broken" {
				continue // owned by the loader's tests
			}
			root := filepath.Join(dir, n, "openapi.yaml")
			if _, err := os.Stat(root); err == nil {
				out = append(out, goldenCase{name: n, spec: root})
			}
		case strings.HasSuffix(n, ".config.yaml"):
		case strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".json"):
			c := goldenCase{name: strings.TrimSuffix(strings.TrimSuffix(n, ".yaml"), ".json"), spec: filepath.Join(dir, n)}
			if cfg := filepath.Join(dir, c.name+".config.yaml"); fileExists(cfg) {
				c.config = cfg
			}
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// packageName makes a Go package name of a case name ("body-key" -> "bodykey").
func packageName(c string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(c) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9' && b.Len() > 0) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// generateCase runs the loader and the generator on one case: the files, or error.txt. As
// `idemgen generate --docs --sql` does, it adds the store's schema (FileSQL): the PostgreSQL
// store's, except in the db- cases, whose handlers write through another store's handle.
func generateCase(t *testing.T, c goldenCase) map[string][]byte {
	t.Helper()
	doc, opts, errText := loadCase(t, c)
	if errText != "" {
		return map[string][]byte{"error.txt": []byte(errText)}
	}
	files, err := Generate(doc, opts)
	if err != nil {
		return map[string][]byte{"error.txt": []byte(diagText(err) + "\n")}
	}
	if !strings.HasPrefix(c.name, "db-") {
		if files[FileSQL], err = SQL(); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// loadCase loads one case and gives the options it is generated with, or the text of
// error.txt when the loader refuses it.
func loadCase(t *testing.T, c goldenCase) (*model.Document, Options, string) {
	t.Helper()
	res, err := spec.Load(context.Background(), spec.Options{Path: c.spec, ConfigPath: c.config})
	if err != nil {
		return nil, Options{}, err.Error() + "\n"
	}
	if res.Diags.HasErrors() || res.Doc == nil {
		// What `idemgen generate` prints: the loader's errors and the generator's, in one run.
		Diagnose(res.Doc, res.Diags)
		return nil, Options{}, diagText(res.Diags.Err()) + "\n"
	}
	opts := Options{Package: packageName(c.name), Docs: true}
	if strings.HasPrefix(c.name, "target-middleware") {
		opts.Target = TargetMiddleware
	}
	return res.Doc, opts, ""
}

func diagText(err error) string {
	if err == nil {
		return "no error"
	}
	// Paths are relative to the generator directory; show them from the module root.
	return strings.ReplaceAll(err.Error(), "../testdata/", "testdata/")
}

// TestGolden compares the output for every case with golden/<case>/ (rewritten with -update).
func TestGolden(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got := generateCase(t, c)
			dir := filepath.Join("..", "golden", c.name)
			if *update {
				// error.txt has no generated-file header, so it is written beside Write's files.
				errText, failed := got["error.txt"]
				gen := map[string][]byte{}
				if !failed {
					gen = got
				}
				if _, err := Write(dir, gen); err != nil {
					t.Fatal(err)
				}
				if failed {
					if err := os.WriteFile(filepath.Join(dir, "error.txt"), errText, 0o644); err != nil {
						t.Fatal(err)
					}
				} else {
					os.Remove(filepath.Join(dir, "error.txt"))
				}
				return
			}
			want := map[string][]byte{}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("no golden output (run go test ./generator -update): %v", err)
			}
			for _, e := range entries {
				if e.IsDir() || strings.HasSuffix(e.Name(), "_test.go") {
					continue // hand-written tests of the generated code, and their testdata, live beside it
				}
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				want[e.Name()] = b
			}
			if diff := cmp.Diff(stringMap(want), stringMap(got)); diff != "" {
				t.Errorf("golden/%s differs (-want +got); run go test ./generator -update:\n%s", c.name, diff)
			}
		})
	}
}

func stringMap(m map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// TestGoldenCompiles builds and vets every golden package, so a golden can never be code that
// does not compile against the real runtime.
func TestGoldenCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	var pkgs []string
	for _, c := range goldenCases(t) {
		if fileExists(filepath.Join("..", "golden", c.name, FileTypes)) {
			pkgs = append(pkgs, "./golden/"+c.name)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no golden packages")
	}
	for _, args := range [][]string{{"build"}, {"vet"}} {
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s: %v\n%s", args[0], err, out)
		}
	}
}

// TestGoldenCitesOnlyPublicDocs: generated code, contracts and error messages cite the design
// contract that ships with the repository (docs/design.md section N), never an internal design
// file or issue numbers a user cannot look up.
func TestGoldenCitesOnlyPublicDocs(t *testing.T) {
	bad := regexp.MustCompile(`DESIGN section|(?i)\bissue \d`)
	err := filepath.WalkDir(filepath.Join("..", "golden"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "README.md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bad.MatchString(line) {
				t.Errorf("%s:%d cites %q: %s", p, i+1, bad.FindString(line), strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
