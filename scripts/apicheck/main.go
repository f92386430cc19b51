// Command apicheck fails when the public API of the idemgen module changed incompatibly since
// the last release point and CHANGELOG.md does not mark the change as breaking.
//
//	go run . [-repo DIR] [-base COMMIT]
//
// The last release point is the newest release heading of CHANGELOG.md that names a commit
// ("## 0.1.0 — 2026-11-30 (commit 1b4cdd7)"); -base compares against another commit instead.
// The release point's tree is read with `git archive` (no checkout, no network), both trees'
// public packages are type-checked, and golang.org/x/exp/apidiff, at the version go.mod pins,
// lists the incompatible changes. Each one must be marked: named in backquotes, with its package
// path relative to the module (`runtime.Config.Pool`, `runtime/pgstore.Options`), or through an
// enclosing name (`runtime.Config`, or a package `runtime/migrations`), in a "### Breaking"
// subsection of a section above the release point's heading.
//
// The public packages are runtime and everything under it except internal packages, and
// examples/petstore/api, the generated code that stands for every generated package's API.
// The generator, templates and the command are implementation: the CLI's interface is covered
// by the version policy (README.md), not by this check.
//
// Exit status: 0 when every incompatible change is marked, 1 when one is not, 2 when the check
// cannot run (no CHANGELOG release point, the commit missing from a shallow clone, a tree that
// does not type-check).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	repo := flag.String("repo", "", "the repository's root (default: the git top level of the current folder)")
	base := flag.String("base", "", "compare against this commit instead of CHANGELOG.md's last release point")
	flag.Parse()
	if *repo == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			fail(2, fmt.Errorf("find the repository: %w", err))
		}
		*repo = strings.TrimSpace(string(out))
	}
	res, err := Check(*repo, *base)
	if err != nil {
		fail(2, err)
	}
	res.Print(os.Stdout)
	if len(res.Unmarked) > 0 {
		os.Exit(1)
	}
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "apicheck:", err)
	os.Exit(code)
}

// Check compares the public API of the repository's working tree with that of the release point
// (base, or CHANGELOG.md's) and matches the incompatible changes with the CHANGELOG's marks.
func Check(repo, base string) (*Result, error) {
	log, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	cl, err := ParseChangelog(string(log))
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = cl.Base.Commit
	}
	old, err := os.MkdirTemp("", "apicheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(old)
	if err := extract(repo, base, old); err != nil {
		return nil, err
	}
	oldAPI, err := LoadAPI(old)
	if err != nil {
		return nil, fmt.Errorf("the release point %s: %w", base, err)
	}
	newAPI, err := LoadAPI(repo)
	if err != nil {
		return nil, fmt.Errorf("the working tree: %w", err)
	}
	res := &Result{Release: cl.Base.Version, Commit: base}
	for _, c := range Incompatible(oldAPI, newAPI) {
		if cl.Marks(c.Ident) {
			res.Marked = append(res.Marked, c)
		} else {
			res.Unmarked = append(res.Unmarked, c)
		}
	}
	return res, nil
}
