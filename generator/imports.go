package generator

import (
	"bytes"
	"strconv"
	"strings"
)

// groupImports splits the import block of a rendered file into the standard library's packages,
// then a blank line, then every other package, as goimports writes them (jennifer renders one
// block sorted by path). The two groups keep jennifer's order, so the file stays a fixed point
// of gofmt. A file without a parenthesized import block, or with imports of one kind only, is
// returned as it is.
func groupImports(src []byte) []byte {
	const open, end = "\nimport (\n", "\n)\n"
	start := bytes.Index(src, []byte(open))
	if start < 0 {
		return src
	}
	body := start + len(open)
	n := bytes.Index(src[body:], []byte(end))
	if n < 0 {
		return src
	}
	var std, other []string
	for line := range strings.SplitSeq(string(src[body:body+n]), "\n") {
		if isStdImport(line) {
			std = append(std, line)
		} else {
			other = append(other, line)
		}
	}
	if len(std) == 0 || len(other) == 0 {
		return src
	}
	var out bytes.Buffer
	out.Grow(len(src) + 1)
	out.Write(src[:body])
	out.WriteString(strings.Join(std, "\n"))
	out.WriteString("\n\n")
	out.WriteString(strings.Join(other, "\n"))
	out.Write(src[body+n:])
	return out.Bytes()
}

// isStdImport reports whether an import line ("\t\"net/http\"", or with a name before the
// path) names a standard library package: one whose first path element has no dot, the rule
// goimports and the go command use.
func isStdImport(line string) bool {
	_, quoted, _ := strings.Cut(strings.TrimSpace(line), `"`)
	path, err := strconv.Unquote(`"` + quoted)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
