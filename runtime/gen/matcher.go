package gen

import (
	"regexp"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// Matcher matches strings against regular expressions from the spec (JSON Schema "pattern",
// key.pattern), compiling each pattern once and keeping it for the life of the Matcher. It is
// safe for concurrent use. Its zero value is ready; a nil *Matcher also works but compiles the
// pattern on every call, which only tests should rely on.
//
// OpenAPI patterns are ECMA-262 regular expressions. A pattern Go's regexp (RE2, linear time)
// compiles runs on RE2; one it refuses (lookahead, lookbehind, backreferences) runs on regexp2
// in ECMAScript mode (github.com/dlclark/regexp2/v2), a backtracking engine, under a match
// timeout: a match that takes longer than Timeout counts as no match, so the value is refused
// rather than let through. A pattern neither engine compiles matches nothing (the loader refuses
// such patterns, so generated code never meets one).
type Matcher struct {
	// Timeout bounds one ECMAScript match; 0 means DefaultMatchTimeout. Set it before the
	// first match: patterns compiled earlier keep the timeout they were compiled with.
	Timeout time.Duration

	// cache maps a cacheKey to a compiled matcher. Lookups of patterns already compiled take no
	// lock; mu serialises compilation, so each pattern is compiled once.
	cache sync.Map
	mu    sync.Mutex
}

// DefaultMatchTimeout bounds one match of a pattern on the ECMAScript engine. Values checked
// against patterns are request fields of at most the body limit, and a pattern without
// catastrophic backtracking matches them in microseconds.
const DefaultMatchTimeout = 100 * time.Millisecond

// Engine names the engine that runs a pattern.
type Engine string

const (
	EngineRE2        Engine = "re2"        // Go's regexp: the pattern is valid RE2 syntax
	EngineECMAScript Engine = "ecmascript" // regexp2 in ECMAScript mode, with a match timeout
)

// compiled is one compiled pattern, behind an interface so that callers do not see which engine
// runs it.
type compiled interface {
	MatchString(s string) bool
}

// never is the matcher of a pattern that does not compile.
type never struct{}

func (never) MatchString(string) bool { return false }

// ecma is a pattern run by regexp2; a timeout or an exhausted backtracking stack is no match.
type ecma struct{ re *regexp2.Regexp }

func (e ecma) MatchString(s string) bool {
	ok, err := e.re.MatchString(s)
	return ok && err == nil
}

type cacheKey struct {
	pattern string
	whole   bool
}

// Match reports whether s contains a match of pattern (JSON Schema semantics: patterns are not
// anchored).
func (m *Matcher) Match(pattern, s string) bool { return m.get(pattern, false).MatchString(s) }

// MatchWhole reports whether all of s matches pattern, as key.pattern requires.
func (m *Matcher) MatchWhole(pattern, s string) bool { return m.get(pattern, true).MatchString(s) }

// Check compiles pattern and returns why it does not compile on either engine, or nil; a runtime
// validating its settings calls it once per pattern.
func (m *Matcher) Check(pattern string) error {
	_, err := CheckPattern(pattern)
	return err
}

// CheckPattern returns the engine that runs pattern, or why neither compiles it. The loader
// (idemgen check) calls it, so it accepts exactly the patterns the runtime can run.
func CheckPattern(pattern string) (Engine, error) {
	c, err := compile(pattern, false, 0)
	if err != nil {
		return "", err
	}
	if _, ok := c.(ecma); ok {
		return EngineECMAScript, nil
	}
	return EngineRE2, nil
}

func (m *Matcher) timeout() time.Duration {
	if m == nil || m.Timeout <= 0 {
		return DefaultMatchTimeout
	}
	return m.Timeout
}

func (m *Matcher) get(pattern string, whole bool) compiled {
	k := cacheKey{pattern, whole}
	if m == nil {
		c, _ := compile(pattern, whole, 0)
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
	c, _ := compile(pattern, whole, m.timeout())
	m.cache.Store(k, c)
	return c
}

// compile builds the matcher of pattern: RE2 when Go's regexp compiles it, else the ECMAScript
// engine; whole anchors it at both ends (without the m flag, $ matches only at the end of the
// text on both engines). timeout 0 is DefaultMatchTimeout.
func compile(pattern string, whole bool, timeout time.Duration) (compiled, error) {
	src := pattern
	if whole {
		src = Anchored(pattern)
	}
	re, err := regexp.Compile(src)
	if err == nil {
		return re, nil
	}
	e, eerr := compileECMA(src)
	if eerr != nil {
		return never{}, &PatternError{RE2: err, ECMAScript: eerr}
	}
	if timeout <= 0 {
		timeout = DefaultMatchTimeout
	}
	e.MatchTimeout = timeout
	return ecma{e}, nil
}

// compileECMA compiles src as ECMA-262 with the u flag (code points, \p{...}), as JSON Schema
// validators do, and, when the u flag's stricter syntax refuses it, without (the web's legacy
// syntax, Annex B: identity escapes such as \_ or \: outside a class). Go strings are matched
// by code point either way.
func compileECMA(src string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode)
	if err == nil {
		return re, nil
	}
	if legacy, lerr := regexp2.Compile(src, regexp2.ECMAScript); lerr == nil {
		return legacy, nil
	}
	return nil, err
}

// PatternError is a pattern that neither engine compiles.
type PatternError struct {
	RE2, ECMAScript error
}

func (e *PatternError) Error() string {
	return "neither Go's regexp (RE2: " + e.RE2.Error() + ") nor the ECMAScript engine (" + e.ECMAScript.Error() + ") compiles it"
}

// Unwrap returns both engines' errors.
func (e *PatternError) Unwrap() []error { return []error{e.RE2, e.ECMAScript} }

// Anchored is pattern wrapped so that it must match the whole string: ^(?:pattern)$. Error
// messages about key patterns quote this form.
func Anchored(pattern string) string { return "^(?:" + pattern + ")$" }
