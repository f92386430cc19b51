// Package diag holds located diagnostics: every problem idemgen finds in a spec, a config file or
// an overlay carries the file, line, column and JSON pointer of what is wrong, and a stable code.
// A run collects all of them, sorts them, and prints them together.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Severity orders diagnostics: errors fail a run; warnings fail it only under --strict.
type Severity int

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Loc is a place in a source document. Line and Column are 1-based; 0 means unknown.
// Pointer is the RFC 6901 JSON pointer of the value inside File ("" for the whole document).
type Loc struct {
	File    string
	Line    int
	Column  int
	Pointer string
}

func (l Loc) String() string {
	var b strings.Builder
	b.WriteString(l.File)
	if l.Line > 0 {
		fmt.Fprintf(&b, ":%d", l.Line)
		if l.Column > 0 {
			fmt.Fprintf(&b, ":%d", l.Column)
		}
	}
	return b.String()
}

// Diagnostic is one located problem. Code is stable across releases (e.g. "unknown-field",
// "bad-duration", "exclude-matches-nothing") so scripts and tests can match on it.
type Diagnostic struct {
	Severity Severity
	Code     string
	Loc      Loc
	Message  string
	// Hint, when set, says how to fix it (e.g. the config entry that would mark an operation).
	Hint string
}

// String renders "file:line:col: error[code]: message (at #/pointer)" plus an indented hint.
func (d Diagnostic) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s[%s]: %s", d.Loc, d.Severity, d.Code, d.Message)
	if d.Loc.Pointer != "" {
		fmt.Fprintf(&b, " (at #%s)", d.Loc.Pointer)
	}
	if d.Hint != "" {
		b.WriteString("\n    ")
		b.WriteString(strings.ReplaceAll(d.Hint, "\n", "\n    "))
	}
	return b.String()
}

// List collects diagnostics. The zero value is ready to use.
type List struct {
	items []Diagnostic
}

// Add appends one diagnostic.
func (l *List) Add(d Diagnostic) { l.items = append(l.items, d) }

// Errorf adds an error at loc.
func (l *List) Errorf(loc Loc, code, format string, args ...any) {
	l.Add(Diagnostic{Severity: Error, Code: code, Loc: loc, Message: fmt.Sprintf(format, args...)})
}

// Warnf adds a warning at loc.
func (l *List) Warnf(loc Loc, code, format string, args ...any) {
	l.Add(Diagnostic{Severity: Warning, Code: code, Loc: loc, Message: fmt.Sprintf(format, args...)})
}

// Merge appends every diagnostic of o.
func (l *List) Merge(o *List) {
	if o != nil {
		l.items = append(l.items, o.items...)
	}
}

// HasErrors reports whether any diagnostic is an error.
func (l *List) HasErrors() bool {
	for _, d := range l.items {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Len is the number of diagnostics.
func (l *List) Len() int { return len(l.items) }

// Sorted returns the diagnostics ordered by file, line, column, pointer, code and message, with
// exact duplicates removed, so every run prints the same list.
func (l *List) Sorted() []Diagnostic {
	out := append([]Diagnostic(nil), l.items...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Loc.File != b.Loc.File:
			return a.Loc.File < b.Loc.File
		case a.Loc.Line != b.Loc.Line:
			return a.Loc.Line < b.Loc.Line
		case a.Loc.Column != b.Loc.Column:
			return a.Loc.Column < b.Loc.Column
		case a.Loc.Pointer != b.Loc.Pointer:
			return a.Loc.Pointer < b.Loc.Pointer
		case a.Code != b.Code:
			return a.Code < b.Code
		default:
			return a.Message < b.Message
		}
	})
	dedup := out[:0]
	for i, d := range out {
		if i > 0 && d == out[i-1] {
			continue
		}
		dedup = append(dedup, d)
	}
	return dedup
}

// Err returns nil when the list holds no error, else an *Errors holding every diagnostic.
func (l *List) Err() error {
	if !l.HasErrors() {
		return nil
	}
	return &Errors{List: l.Sorted()}
}

// Errors is the error a failed stage returns: all its diagnostics, sorted.
type Errors struct {
	List []Diagnostic
}

func (e *Errors) Error() string {
	parts := make([]string, len(e.List))
	for i, d := range e.List {
		parts[i] = d.String()
	}
	return strings.Join(parts, "\n")
}

// Filter keeps only the diagnostics for which keep returns true.
func (l *List) Filter(keep func(Diagnostic) bool) {
	out := l.items[:0]
	for _, d := range l.items {
		if keep(d) {
			out = append(out, d)
		}
	}
	l.items = out
}
