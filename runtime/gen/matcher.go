package gen

import (
	"regexp"
	"sync"
)

// Matcher matches strings against regular expressions from the spec (JSON Schema "pattern",
// key.pattern), compiling each pattern once and keeping it for the life of the Matcher. It is
// safe for concurrent use. Its zero value is ready; a nil *Matcher also works but compiles the
// pattern on every call, which only tests should rely on.
//
// Patterns use Go's RE2 syntax for now (the loader refuses a pattern RE2 cannot compile). A
// pattern that does not compile matches nothing, so a value is refused rather than let through.
type Matcher struct {
	// cache maps a cacheKey to a compiled matcher. Lookups of patterns already compiled take no
	// lock; mu serialises compilation, so each pattern is compiled once.
	cache sync.Map
	mu    sync.Mutex
}

// compiled is one compiled pattern, behind an interface so that another regular-expression
// engine (ECMAScript semantics) can be added inside this package without changing callers.
type compiled interface {
	MatchString(s string) bool
}

// never is the matcher of a pattern that does not compile.
type never struct{}

func (never) MatchString(string) bool { return false }

type cacheKey struct {
	pattern string
	whole   bool
}

// Match reports whether s contains a match of pattern (JSON Schema semantics: patterns are not
// anchored).
func (m *Matcher) Match(pattern, s string) bool { return m.get(pattern, false).MatchString(s) }

// MatchWhole reports whether all of s matches pattern, as key.pattern requires.
func (m *Matcher) MatchWhole(pattern, s string) bool { return m.get(pattern, true).MatchString(s) }

// Check compiles pattern and returns why it does not compile, or nil; a runtime validating its
// settings calls it once per pattern.
func (m *Matcher) Check(pattern string) error {
	_, err := compile(pattern, false)
	return err
}

func (m *Matcher) get(pattern string, whole bool) compiled {
	k := cacheKey{pattern, whole}
	if m == nil {
		c, _ := compile(pattern, whole)
		return c
	}
	if c, ok := m.cache.Load(k); ok {
		return c.(compiled)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cache.Load(k); ok {
		return c.(compiled)
	}
	c, _ := compile(pattern, whole)
	m.cache.Store(k, c)
	return c
}

// compile builds the matcher of pattern; whole anchors it at both ends (RE2's $ without the m
// flag matches only at the end of the text).
func compile(pattern string, whole bool) (compiled, error) {
	src := pattern
	if whole {
		src = Anchored(pattern)
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return never{}, err
	}
	return re, nil
}

// Anchored is pattern wrapped so that it must match the whole string: ^(?:pattern)$. Error
// messages about key patterns quote this form.
func Anchored(pattern string) string { return "^(?:" + pattern + ")$" }
