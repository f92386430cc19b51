package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const changelog = "# Changelog\n\n## Unreleased\n\n### Added\n\n- `runtime.New` options (not a mark: not under Breaking)\n\n" +
	"### Breaking changes\n\n- `runtime.Config.Pool` is gone; `runtime/migrations` moved; `runtime.Migrate()` too.\n\n" +
	"## 0.2.0 — 2026-12-02 (commit abcdef1)\n\n### Breaking\n\n- `runtime.Old` (before the release point: not a mark)\n\n" +
	"## 0.1.0 — 2026-11-30 (commit 1b4cdd7)\n"

func TestParseChangelog(t *testing.T) {
	cl, err := ParseChangelog(changelog)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Base != (Release{Version: "0.2.0", Commit: "abcdef1"}) {
		t.Errorf("release point %+v, want the newest release heading", cl.Base)
	}
	for ident, want := range map[string]bool{
		"runtime.Config.Pool":        true,
		"runtime.Config":             false, // a field's mark does not cover its struct
		"runtime.Config.PoolSize":    false, // a name is matched whole
		"runtime/migrations":         true,
		"runtime/migrations.FS":      true,
		"runtime.Migrate":            true, // "()" is dropped
		"runtime.New":                false,
		"runtime.Old":                false,
		"runtime/migrationsextra.FS": false,
	} {
		if got := cl.Marks(ident); got != want {
			t.Errorf("Marks(%s) = %v, want %v", ident, got, want)
		}
	}
	if _, err := ParseChangelog("# Changelog\n\n## Unreleased\n"); err == nil {
		t.Error("a CHANGELOG without a release point: no error")
	}
}

func TestIdent(t *testing.T) {
	const m = "github.com/idemgen/idemgen"
	for msg, want := range map[string]string{
		"./runtime.(*Runtime).Begin: removed":                            "runtime.Runtime.Begin",
		"./runtime.(Mode).String: removed":                               "runtime.Mode.String",
		"./runtime.Config.Pool: removed":                                 "runtime.Config.Pool",
		"./runtime/prometheus.Observer: old is comparable, new is not":   "runtime/prometheus.Observer",
		"package github.com/idemgen/idemgen/runtime/migrations: removed": "runtime/migrations",
		"./examples/petstore/api.Operations: changed from var to func":   "examples/petstore/api.Operations",
	} {
		if got := ident(msg, m); got != want {
			t.Errorf("ident(%q) = %q, want %q", msg, got, want)
		}
	}
}

// The whole check on a repository of its own: a release point, then a change that removes a
// function, a struct field and a package. Unmarked, each fails the check; marked, it passes;
// a compatible addition never needs a mark.
func TestCheckRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("runtime/r.go", "package runtime\n\nfunc F() {}\n\ntype T struct{ A, B int }\n")
	write("runtime/old/o.go", "package old\n\nconst X = 1\n")
	write("runtime/internal/i/i.go", "package i\n\nfunc Gone() {}\n")
	write("CHANGELOG.md", "# Changelog\n")
	git("add", "-A")
	git("commit", "-q", "-m", "0.1.0")
	base := git("rev-parse", "--short", "HEAD")

	write("runtime/r.go", "package runtime\n\nfunc G() {}\n\ntype T struct{ B int }\n")
	if err := os.RemoveAll(filepath.Join(repo, "runtime/old")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(repo, "runtime/internal")); err != nil {
		t.Fatal(err)
	}
	release := "## 0.1.0 — 2026-11-30 (commit " + base + ")\n"
	write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n### Breaking\n\n- `runtime.F` is G now.\n\n"+release)

	res, err := Check(repo, "")
	if err != nil {
		t.Fatal(err)
	}
	var unmarked, marked []string
	for _, c := range res.Unmarked {
		unmarked = append(unmarked, c.Ident)
	}
	for _, c := range res.Marked {
		marked = append(marked, c.Ident)
	}
	if !slices.Equal(marked, []string{"runtime.F"}) || !slices.Equal(unmarked, []string{"runtime.T.A", "runtime/old"}) {
		t.Errorf("marked %v, unmarked %v; want [runtime.F] and [runtime.T.A runtime/old] (internal packages and additions never count)", marked, unmarked)
	}

	write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n### Breaking\n\n- `runtime.F` is G now; `runtime.T` lost A; `runtime/old` is gone.\n\n"+release)
	res, err = Check(repo, "")
	if err != nil || len(res.Unmarked) != 0 || len(res.Marked) != 3 {
		t.Errorf("all marked: %+v %v", res, err)
	}

	if _, err := Check(repo, "0123456789abcdef0123456789abcdef01234567"); err == nil || !strings.Contains(err.Error(), "not in this clone") {
		t.Errorf("a commit the clone lacks: %v", err)
	}
}
