package main

import (
	"errors"
	"regexp"
	"strings"
)

// Changelog is what the check reads of CHANGELOG.md: the last release point, and the names
// marked as breaking since then.
type Changelog struct {
	Base  Release
	marks []string
}

// Release is a release heading: "## 0.1.0 — 2026-11-30 (commit 1b4cdd7)".
type Release struct {
	Version, Commit string
}

var (
	releaseHeading  = regexp.MustCompile(`^## \[?v?(\d+\.\d+\.\d+[^\]\s]*)\]?.*\(commit ([0-9a-f]{7,40})\)`)
	breakingHeading = regexp.MustCompile(`(?i)^### +breaking`)
	backquoted      = regexp.MustCompile("`([^`\\s]+)`")
)

// ParseChangelog reads a CHANGELOG.md: the newest release heading that names a commit is the
// release point; every backquoted name in a "### Breaking..." subsection above it is a mark.
func ParseChangelog(text string) (*Changelog, error) {
	cl := &Changelog{}
	inBreaking := false
	for _, line := range strings.Split(text, "\n") {
		if m := releaseHeading.FindStringSubmatch(line); m != nil {
			cl.Base = Release{Version: m[1], Commit: m[2]}
			return cl, nil
		}
		switch {
		case strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### "):
			inBreaking = breakingHeading.MatchString(line)
		case inBreaking:
			for _, m := range backquoted.FindAllStringSubmatch(line, -1) {
				cl.marks = append(cl.marks, strings.TrimSuffix(m[1], "()"))
			}
		}
	}
	return nil, errors.New(`CHANGELOG.md has no release heading that names a commit ("## 0.1.0 — 2026-11-30 (commit 1b4cdd7)")`)
}

// Marks reports whether ident (runtime.Config.Pool, runtime/migrations) is marked as breaking:
// named itself, or through an enclosing name (runtime.Config, runtime).
func (cl *Changelog) Marks(ident string) bool {
	for _, m := range cl.marks {
		if ident == m || strings.HasPrefix(ident, m+".") || strings.HasPrefix(ident, m+"/") {
			return true
		}
	}
	return false
}
