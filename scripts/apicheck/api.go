package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/packages"
)

// publicPatterns are the packages whose API the check compares (see the package doc).
var publicPatterns = []string{"./runtime/...", "./examples/petstore/api"}

// API is the public packages of one tree of the module, type-checked.
type API struct {
	Module   string
	Packages []*types.Package
}

// LoadAPI type-checks the public packages of the module in dir. Packages under an internal
// folder are left out.
func LoadAPI(dir string) (*API, error) {
	cfg := &packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule,
		Env: append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")}
	var patterns []string
	for _, p := range publicPatterns {
		// A tree from before a public folder existed has nothing there to compare.
		if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(p, "/..."))); err == nil {
			patterns = append(patterns, p)
		}
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%s has none of %v", dir, publicPatterns)
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	api := &API{}
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %s", p.PkgPath, e.Msg))
		}
		if p.Module != nil && api.Module == "" {
			api.Module = p.Module.Path
		}
		if p.Types == nil || p.Name == "main" || strings.Contains(p.PkgPath+"/", "/internal/") {
			continue
		}
		api.Packages = append(api.Packages, p.Types)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if api.Module == "" {
		return nil, fmt.Errorf("%s: no module", dir)
	}
	sort.Slice(api.Packages, func(i, j int) bool { return api.Packages[i].Path() < api.Packages[j].Path() })
	return api, nil
}

// Change is one incompatible change: the name it is about, module-relative
// (runtime.Runtime.Begin, runtime/migrations), and apidiff's message.
type Change struct {
	Ident, Message string
}

// Incompatible lists the incompatible changes from old to new, removed packages included.
func Incompatible(old, new *API) []Change {
	r := apidiff.ModuleChanges(&apidiff.Module{Path: old.Module, Packages: old.Packages},
		&apidiff.Module{Path: new.Module, Packages: new.Packages})
	var out []Change
	for _, c := range r.Changes {
		if !c.Compatible {
			out = append(out, Change{Ident: ident(c.Message, old.Module), Message: c.Message})
		}
	}
	return out
}

var receiver = regexp.MustCompile(`\(\*?([A-Za-z_]\w*)\)`)

// ident is the name an apidiff message is about: "./runtime.(*Runtime).Begin: removed" is
// runtime.Runtime.Begin, "package github.com/m/runtime/migrations: removed" runtime/migrations.
func ident(msg, module string) string {
	if p, ok := strings.CutPrefix(msg, "package "); ok {
		p, _, _ = strings.Cut(p, ": ")
		return strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
	}
	name, _, _ := strings.Cut(msg, ": ")
	name = strings.TrimPrefix(name, "./")
	return receiver.ReplaceAllString(name, "$1")
}

// extract writes the tree of commit in repo into dir, from `git archive`.
func extract(repo, commit, dir string) error {
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		return fmt.Errorf("commit %s is not in this clone (a shallow clone? git fetch --unshallow)", commit)
	}
	cmd := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("git archive %s: %w", commit, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("git archive %s: %q is outside the tree", commit, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	return cmd.Wait()
}
