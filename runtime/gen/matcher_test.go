package gen

import (
	"sync"
	"testing"
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
	if m.Check(`(`) == nil || m.Check(`a+`) != nil {
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
