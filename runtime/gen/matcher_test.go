package gen

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMatcher(t *testing.T) {
	var m Matcher
	for _, tt := range []struct {
		pattern, s  string
		match, full bool
	}{
		{`[a-z]+`, "abc", true, true},
		{`[a-z]+`, "ABCd", true, false}, // JSON Schema patterns are not anchored
		{`^[A-Z]{3}-\d+$`, "ABC-12", true, true},
		{`^[A-Z]{3}-\d+$`, "ABC-12\n", false, false},
		{`a|b`, "ab", true, false}, // MatchWhole anchors the whole alternation
		{`(`, "(", false, false},   // does not compile: matches nothing
	} {
		if got := m.Match(tt.pattern, tt.s); got != tt.match {
			t.Errorf("Match(%q, %q) = %v", tt.pattern, tt.s, got)
		}
		if got := m.MatchWhole(tt.pattern, tt.s); got != tt.full {
			t.Errorf("MatchWhole(%q, %q) = %v", tt.pattern, tt.s, got)
		}
		var nilM *Matcher
		if got := nilM.Match(tt.pattern, tt.s); got != tt.match {
			t.Errorf("nil Matcher: Match(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
	if m.Check(`(`) == nil || m.Check(`a+`) != nil || m.Check(`(?<=a)b`) != nil {
		t.Error("Check does not report compile errors")
	}
	if Anchored("a|b") != "^(?:a|b)$" {
		t.Error(Anchored("a|b"))
	}
}

// TestMatcherCompilesOnce: concurrent first uses of a pattern share one compiled value (run
// with -race).
func TestMatcherCompilesOnce(t *testing.T) {
	var m Matcher
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if !m.Match(`^x+$`, "xxx") || m.Match(`^x+$`, "y") {
					t.Error("wrong match")
				}
			}
		})
	}
	wg.Wait()
	first := m.get(`^x+$`, false)
	if again := m.get(`^x+$`, false); again != first {
		t.Error("the pattern was compiled again")
	}
	if m.get(`^x+$`, true) == first {
		t.Error("anchored and unanchored forms share a cache entry")
	}
}

// TestMatcherECMAScript: patterns RE2 refuses (lookahead, lookbehind, backreferences, the
// ECMA-262 syntax of real vendor specs) run on the ECMAScript engine with its semantics; the
// rest stay on RE2; a pattern neither compiles is reported with both engines' reasons.
func TestMatcherECMAScript(t *testing.T) {
	var m Matcher
	for _, tt := range []struct {
		pattern, s  string
		match, full bool
	}{
		// Real specs: no leading or trailing white space; Mollie's transfer description.
		{`^(?!\s)(.*)(\S)$`, "Order 12", true, true},
		{`^(?!\s)(.*)(\S)$`, " Order 12", false, false},
		{`^(?!\s)(.*)(\S)$`, "Order 12 ", false, false},
		{`^(?![:\-]$)(?!.*(--|::))([a-zA-Z0-9]+[\s]*[a-zA-Z0-9/\-?:().,'+_ ]*)?$`, "Invoice 2024/07", true, true},
		{`^(?![:\-]$)(?!.*(--|::))([a-zA-Z0-9]+[\s]*[a-zA-Z0-9/\-?:().,'+_ ]*)?$`, "a--b", false, false},
		{`^(?![:\-]$)(?!.*(--|::))([a-zA-Z0-9]+[\s]*[a-zA-Z0-9/\-?:().,'+_ ]*)?$`, "-", false, false},
		{`(?<=pay_)[0-9]+`, "pay_42", true, false},
		{`(?<=pay_)[0-9]+`, "42", false, false},
		{`^(a|b)\1$`, "aa", true, true},
		{`^(a|b)\1$`, "ab", false, false},
		{`(?=x)x|y`, "y", true, true}, // MatchWhole anchors the whole alternation here too
		{`(?=x)x|y`, "xy", true, false},
		{`^(?=.).$`, "😀", true, true},    // one code point, not two UTF-16 units
		{`^\_(?=a)a$`, "_a", true, true}, // legacy syntax (an identity escape the u flag refuses)
	} {
		if e, err := CheckPattern(tt.pattern); err != nil || e != EngineECMAScript {
			t.Errorf("CheckPattern(%q) = %v, %v; want the ECMAScript engine", tt.pattern, e, err)
		}
		if got := m.Match(tt.pattern, tt.s); got != tt.match {
			t.Errorf("Match(%q, %q) = %v", tt.pattern, tt.s, got)
		}
		if got := m.MatchWhole(tt.pattern, tt.s); got != tt.full {
			t.Errorf("MatchWhole(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
	if e, err := CheckPattern(`^[a-z]+$`); err != nil || e != EngineRE2 {
		t.Errorf("an RE2 pattern runs on %v (%v)", e, err)
	}
	_, err := CheckPattern(`(?<=a`)
	var pe *PatternError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "RE2") || !strings.Contains(err.Error(), "ECMAScript") {
		t.Errorf("CheckPattern of a broken pattern: %v", err)
	}
}

// TestMatcherTimeout: a catastrophically backtracking ECMAScript pattern is cut off by the match
// timeout and counts as no match (the value is refused), while the same pattern still matches
// quickly where it can.
func TestMatcherTimeout(t *testing.T) {
	m := Matcher{Timeout: 20 * time.Millisecond}
	const evil = `^(?=a)(a|aa)+$`
	if !m.Match(evil, "aaaa") {
		t.Fatal("the pattern does not match a short value")
	}
	start := time.Now()
	if m.Match(evil, strings.Repeat("a", 60)+"!") {
		t.Error("a value the pattern does not match was let through")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the match took %v: the timeout did not stop it", d)
	}
}
