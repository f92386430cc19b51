package generator

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
)

// namer hands out unique Go identifiers within one scope (the generated package, or the fields
// of one struct). Every generated name passes through it, so two spec names that map to the same
// identifier (operationIds "create-payment" and "createPayment", a schema named "Handlers") get
// distinct, deterministic names: the first comes first in spec order and keeps the plain name,
// later ones get a numeric suffix.
type namer struct {
	used map[string]bool
}

func newNamer(reserved ...string) *namer {
	n := &namer{used: map[string]bool{}}
	for _, r := range reserved {
		n.used[r] = true
	}
	return n
}

// take returns want, or want2, want3, ... if want is taken, and marks the result as used.
func (n *namer) take(want string) string {
	if !n.used[want] {
		n.used[want] = true
		return want
	}
	for i := 2; ; i++ {
		c := want + strconv.Itoa(i)
		if !n.used[c] {
			n.used[c] = true
			return c
		}
	}
}

// exportedIdent turns arbitrary spec text (an enum value, a parameter name) into an exported Go
// identifier: words split on anything that is not a letter or digit, each word capitalised
// ("card_present" -> "CardPresent", "EUR" -> "EUR", "3ds" -> "X3ds", "" -> "Empty").
func exportedIdent(s string) string {
	var b strings.Builder
	upperNext := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upperNext = true
			continue
		}
		if upperNext {
			r = unicode.ToUpper(r)
			upperNext = false
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" {
		return "Empty"
	}
	if r, _ := utf8.DecodeRuneInString(out); !unicode.IsLetter(r) || !unicode.IsUpper(r) {
		// A leading digit (or a letter without case) cannot start an exported identifier.
		out = "X" + out
	}
	return out
}

// isIdent reports whether s is a valid Go identifier (ServeMux wildcard names must be).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r)) {
			continue
		}
		return false
	}
	return true
}

// lowerFirst makes an unexported identifier from an exported one ("CreatePayment" ->
// "createPayment", "URLFetch" -> "uRLFetch"; only the first rune changes, which is enough to be
// unique because the exported names already are).
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// comment writes a doc comment as // lines, wrapped at 100 columns, keeping the text's own line
// breaks (jennifer would turn a multi-line comment into a /* */ block).
func comment(f *jen.File, format string, args ...any) {
	for _, line := range wrapText(fmt.Sprintf(format, args...), 97) {
		f.Comment(line)
	}
}

// wrapText splits s into lines of at most width bytes at spaces (longer words stay whole).
func wrapText(s string, width int) []string {
	var out []string
	s = strings.ReplaceAll(s, "\r", "")
	for _, para := range strings.Split(strings.TrimSpace(s), "\n") {
		words := strings.Fields(para)
		if len(words) == 0 {
			out = append(out, "")
			continue
		}
		line := words[0]
		for _, w := range words[1:] {
			if len(line)+1+len(w) > width {
				out = append(out, line)
				line = w
				continue
			}
			line += " " + w
		}
		out = append(out, line)
	}
	return out
}
