package main

import (
	"fmt"
	"io"
)

// Result is the check's finding: the incompatible changes since the release point, marked in
// the CHANGELOG or not.
type Result struct {
	Release, Commit  string
	Marked, Unmarked []Change
}

// Print writes the finding for a person: every unmarked change with what to do about it, and a
// count of the marked ones.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "apicheck: %d incompatible changes of the public API since %s (commit %s): %d marked as breaking in CHANGELOG.md, %d not\n",
		len(r.Marked)+len(r.Unmarked), r.Release, r.Commit, len(r.Marked), len(r.Unmarked))
	for _, c := range r.Unmarked {
		fmt.Fprintf(w, "  not marked: %s\n", c.Message)
	}
	if len(r.Unmarked) > 0 {
		fmt.Fprintln(w, "Each needs an entry under \"### Breaking\" in CHANGELOG.md's Unreleased section that names it in")
		fmt.Fprintln(w, "backquotes (`"+r.Unmarked[0].Ident+"`, or an enclosing name) and says how to migrate.")
	}
}
