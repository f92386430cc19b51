package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExamples runs every `$ idemgen list|check …` example of README.md and docs/ (a
// fenced block whose first line is the command, the rest its output) and compares the output
// with what the real command prints, so an example cannot go stale. Paths in the commands are
// relative to the repository root.
func TestReadmeExamples(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append([]string{"../../README.md"}, files...)
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range commandExamples(string(b)) {
			found++
			args := strings.Fields(strings.TrimPrefix(ex.command, "$ idemgen "))
			for i, a := range args {
				if !strings.HasPrefix(a, "-") && strings.Contains(a, "/") {
					args[i] = filepath.Join("../..", a)
				}
			}
			_, out, errOut := idemgen(t, args...)
			if got := strings.TrimRight(errOut+out, "\n"); got != ex.output { // diagnostics come first, as in a terminal
				t.Errorf("%s: the example of %q is stale; the command prints:\n%s\nthe example shows:\n%s", filepath.Base(f), ex.command, got, ex.output)
			}
		}
	}
	if found == 0 {
		t.Fatal("no `$ idemgen list` example found in README.md; did its form change?")
	}
}

type commandExample struct{ command, output string }

// commandExamples finds the fenced blocks whose first line is `$ idemgen list …` or
// `$ idemgen check …`.
func commandExamples(md string) []commandExample {
	var out []commandExample
	blocks := strings.Split(md, "```")
	for i := 1; i < len(blocks); i += 2 {
		body := blocks[i]
		_, body, _ = strings.Cut(body, "\n") // the info string
		first, rest, _ := strings.Cut(body, "\n")
		if strings.HasPrefix(first, "$ idemgen list ") || strings.HasPrefix(first, "$ idemgen check ") {
			out = append(out, commandExample{command: first, output: strings.TrimRight(rest, "\n")})
		}
	}
	return out
}
