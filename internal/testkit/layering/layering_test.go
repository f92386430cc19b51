package layering

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/idemgen/idemgen/"

// thirdParty are the names docs/architecture.md gives modules by, for its "Never X" and "the
// only importer of X" rules.
var thirdParty = map[string]string{
	"pgx":         "github.com/jackc/pgx/",
	"kin-openapi": "github.com/getkin/kin-openapi/",
	"rueidis":     "github.com/redis/rueidis",
}

// rule is one row of the table: the package, and what its "may import" cell allows.
type rule struct {
	pkg   string // path inside the module
	cell  string // the "may import" cell as written
	any   bool   // "everything below"
	std   bool   // "stdlib only": nothing outside the standard library
	never []string
	only  []string // modules no other package may import ("the only importer of X")
}

// pkg is a package as go list describes it: its direct imports and every package it depends on.
type pkg struct {
	path          string // inside the module
	imports, deps []string
}

// TestImportRules: every row of docs/architecture.md's table names a package of this module (a
// row left behind by a moved or removed package would otherwise check nothing), every package of
// the module has a row (benchmark harnesses, goldens and examples aside: harness), every package
// imports only the packages of this module its "may import" cell names, nothing outside the
// standard library when it says "stdlib only", never (even indirectly) a module it says "Never"
// of, and a module it is "the only importer of" is imported by no other package.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	rules := readRules(t, filepath.Join("..", "..", "..", "docs", "architecture.md"))
	pkgs := listPackages(t)
	for _, v := range check(rules, pkgs) {
		t.Error(v)
	}
}

// TestNoProductLinksATestKit: the idemgen binary and the runtime's packages depend on no package
// under internal/testkit (docs/architecture.md: the idemgen binary and the runtime never link the
// test kits). Test files are not part of a package's dependencies here, as they are not linked
// into what users build.
func TestNoProductLinksATestKit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	pkgs := goList(t, "-deps", "./cmd/idemgen", "./runtime/...")
	if len(pkgs) < 10 {
		t.Fatalf("go list -deps named %d packages of this module", len(pkgs))
	}
	for _, v := range testKitsLinked(pkgs) {
		t.Error(v)
	}
}

// testKitsLinked returns a violation for each test kit among pkgs (the dependencies of the
// product's packages), naming the packages among them that import it.
func testKitsLinked(pkgs []pkg) []string {
	var out []string
	for _, kit := range pkgs {
		if !strings.HasPrefix(kit.path, testKits) {
			continue
		}
		var by []string
		for _, p := range pkgs {
			if slices.Contains(p.imports, module+kit.path) {
				by = append(by, p.path)
			}
		}
		out = append(out, "the product links the test kit "+kit.path+" (imported by "+strings.Join(by, ", ")+
			"): docs/architecture.md says cmd/idemgen and runtime/... never link a package under "+testKits)
	}
	return out
}

// testKits is the folder of the test kits.
const testKits = "internal/testkit/"

// TestCheckFindsViolations: check and testKitsLinked report each kind of violation (so
// TestImportRules and TestNoProductLinksATestKit can fail).
func TestCheckFindsViolations(t *testing.T) {
	rules := []rule{
		{pkg: "runtime", cell: "runtime/store, runtime/canonical. **Never pgx.**", never: []string{"pgx"}},
		{pkg: "runtime/canonical", cell: "stdlib only", std: true},
		{pkg: "internal/spec", cell: "model", only: []string{"kin-openapi"}},
		{pkg: "runtime/moved", cell: "stdlib only", std: true},
	}
	pkgs := []pkg{
		{path: "runtime", imports: []string{"net/http", module + "runtime/store", module + "runtime/gen"},
			deps: []string{module + "runtime/store", "github.com/jackc/pgx/v5"}},
		{path: "runtime/canonical", imports: []string{"strings", "github.com/some/lib"}},
		{path: "internal/spec", imports: []string{module + "internal/model", "github.com/getkin/kin-openapi/openapi3"}},
		{path: "generator", imports: []string{"github.com/getkin/kin-openapi/openapi3"}},
		{path: "internal/rowless", imports: []string{"strings"}},
		{path: "golden/petstore", imports: []string{module + "runtime"}},
	}
	got := strings.Join(check(rules, pkgs), "\n")
	for _, want := range []string{
		"runtime imports runtime/gen",
		"runtime depends on github.com/jackc/pgx/v5",
		"runtime/canonical imports github.com/some/lib",
		"generator imports github.com/getkin/kin-openapi/openapi3",
		"docs/architecture.md has a row for runtime/moved, which is no package of this module",
		"internal/rowless has no row in docs/architecture.md's import table",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no violation %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "internal/spec imports") || strings.Contains(got, "runtime imports runtime/store") ||
		strings.Contains(got, "row for runtime/canonical") || strings.Contains(got, "golden/petstore") {
		t.Errorf("an allowed import reported:\n%s", got)
	}
	linked := strings.Join(testKitsLinked([]pkg{
		{path: "cmd/idemgen", imports: []string{module + "runtime", module + "internal/conform"}},
		{path: "runtime", imports: []string{module + "runtime/gen"}},
		{path: "internal/conform", imports: []string{module + "internal/testkit/fptest"}},
		{path: "internal/testkit/fptest", imports: []string{module + "runtime"}},
	}), "\n")
	if !strings.Contains(linked, "links the test kit internal/testkit/fptest (imported by internal/conform)") || strings.Count(linked, "\n") != 0 {
		t.Errorf("testKitsLinked: %q, want one violation, fptest imported by internal/conform", linked)
	}
}

// check returns the violations of rules by pkgs.
func check(rules []rule, pkgs []pkg) []string {
	var out []string
	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[p.path] = true
	}
	byPath := map[string]rule{}
	for _, r := range rules {
		byPath[r.pkg] = r
		if !listed[r.pkg] {
			out = append(out, "docs/architecture.md has a row for "+r.pkg+", which is no package of this module (moved or removed?): the row checks nothing")
		}
	}
	for _, r := range rules {
		for _, name := range r.only {
			for _, p := range pkgs {
				if p.path == r.pkg || strings.HasPrefix(p.path, r.pkg+"/") || harness(p.path) {
					continue
				}
				for _, imp := range p.imports {
					if strings.HasPrefix(imp, thirdParty[name]) {
						out = append(out, p.path+" imports "+imp+": docs/architecture.md makes "+r.pkg+" the only importer of "+name)
					}
				}
			}
		}
	}
	for _, p := range pkgs {
		r, ok := byPath[p.path]
		if !ok && !harness(p.path) {
			out = append(out, p.path+" has no row in docs/architecture.md's import table: its imports go unchecked (add a row with what it may import)")
		}
		if !ok || r.any {
			continue
		}
		for _, imp := range p.imports {
			inner, own := strings.CutPrefix(imp, module)
			switch {
			case own && !allows(r.cell, inner):
				out = append(out, p.path+" imports "+inner+", which its row of docs/architecture.md does not name ("+r.cell+")")
			case !own && r.std && !isStd(imp):
				out = append(out, p.path+" imports "+imp+": docs/architecture.md says stdlib only")
			}
		}
		for _, name := range r.never {
			for _, dep := range p.deps {
				if strings.HasPrefix(dep, thirdParty[name]) || dep+"/" == thirdParty[name] {
					out = append(out, p.path+" depends on "+dep+": docs/architecture.md says never "+name)
					break
				}
			}
		}
	}
	return out
}

// harness reports whether a package is a benchmark harness, a generated test package or an
// example rather than the product: such a package needs no row, and the "only importer" rules
// bind the product (bench/load measures kin-openapi's own cost beside the loader's). golden/ is
// the generator's output, pinned by its golden tests; examples/ are services as a user writes
// them, importing what a user may; bench/ drives the product from outside with whatever a
// measurement needs. Folders starting with _idemgen are generator tests' temporary folders.
func harness(path string) bool {
	for _, dir := range []string{"bench/", "golden/", "examples/", "_idemgen"} {
		if strings.HasPrefix(path, dir) {
			return true
		}
	}
	return false
}

// allows reports whether a "may import" cell names inner, by its path or, for internal/X, by X.
func allows(cell, inner string) bool {
	names := []string{inner}
	if short, ok := strings.CutPrefix(inner, "internal/"); ok {
		names = append(names, short)
	}
	for _, n := range names {
		if regexp.MustCompile(`(^|[^\w/.-])` + regexp.QuoteMeta(n) + `($|[^\w/-])`).MatchString(cell) {
			return true
		}
	}
	return false
}

// isStd reports whether an import path is the standard library's: its first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

var (
	rowPkg = regexp.MustCompile("^\\| `([a-z0-9/_-]+)` \\|")
	never  = regexp.MustCompile(`(?i)\*\*never ([\w-]+)`)
	only   = regexp.MustCompile(`the only importer of ([\w-]+)`)
)

// readRules reads the table under "## Packages and what each may import".
func readRules(t *testing.T, path string) []rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rule
	in := false
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages and what each may import"
			continue
		}
		m := rowPkg.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("%s: a row of the import table without three cells: %s", path, line)
		}
		cell := strings.TrimSpace(cells[2])
		r := rule{pkg: m[1], cell: cell, any: strings.HasPrefix(cell, "everything below"), std: strings.HasPrefix(cell, "stdlib only")}
		for _, m := range never.FindAllStringSubmatch(cell, -1) {
			r.never = append(r.never, strings.ToLower(m[1]))
		}
		for _, m := range only.FindAllStringSubmatch(cells[1], -1) {
			r.only = append(r.only, m[1])
		}
		for _, n := range slices.Concat(r.never, r.only) {
			if thirdParty[n] == "" {
				t.Fatalf("%s: the row of %s names %q, which thirdParty does not know", path, r.pkg, n)
			}
		}
		rules = append(rules, r)
	}
	if len(rules) < 10 {
		t.Fatalf("%s: %d rows in the import table; has its heading changed?", path, len(rules))
	}
	return rules
}

// listPackages lists the module's packages with go list (test files not included: the rules
// are the product's).
func listPackages(t *testing.T) []pkg { return goList(t, "./...") }

// goList runs go list with args at the module's root and returns the module's packages among
// those it names, with their imports and dependencies.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	format := `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}{{"\t"}}{{join .Deps " "}}`
	cmd := exec.Command("go", append([]string{"list", "-f", format}, args...)...)
	cmd.Dir = filepath.Join("..", "..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		path, ok := strings.CutPrefix(f[0], module)
		if !ok || len(f) != 3 {
			continue
		}
		pkgs = append(pkgs, pkg{path: path, imports: strings.Fields(f[1]), deps: strings.Fields(f[2])})
	}
	return pkgs
}
