package conform

import (
	"math/rand/v2"
	"regexp/syntax"
	"strings"
)

// keyBuilder makes strings of a chosen length that a key pattern matches, by walking the
// pattern's syntax tree: each node knows the lengths it can match, and the length asked for is
// shared out between a concatenation's parts, a repetition's count and an alternation's
// branches. Sampling a pattern (gofakeit) cannot meet length bounds the pattern leaves open
// (`^[!-~]+$` with minLength 16: a sample is a few characters long); building to the length
// can. Characters are drawn from each class, letters and digits first, and never ones the
// key's character set refuses (allow).
type keyBuilder struct {
	rng   *rand.Rand
	allow func(byte) bool
}

// unbounded is the longest length a node is asked for when it has no upper bound.
const unbounded = 1 << 16

// build returns a string of length n (bytes; key characters are ASCII) that pattern matches as
// a whole (it is anchored as the runtime anchors key patterns), or false when the pattern
// cannot be parsed as RE2 syntax or matches no such string.
func (b *keyBuilder) build(pattern string, n int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	lo, hi := b.span(re)
	if n < lo || n > hi {
		return "", false
	}
	var out strings.Builder
	if !b.gen(re, n, &out) {
		return "", false
	}
	return out.String(), true
}

// span is the least and the most bytes re can match (hi capped at unbounded).
func (b *keyBuilder) span(re *syntax.Regexp) (lo, hi int) {
	switch re.Op {
	case syntax.OpLiteral:
		return len(string(re.Rune)), len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		if good, other := b.chars(re); len(good)+len(other) == 0 {
			return unbounded + 1, 0 // no usable character: nothing matches
		}
		return 1, 1
	case syntax.OpCapture:
		return b.span(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			l, h := b.span(s)
			lo, hi = lo+l, min(hi+h, unbounded)
		}
		return lo, hi
	case syntax.OpAlternate:
		lo, hi = unbounded+1, 0
		for _, s := range re.Sub {
			l, h := b.span(s)
			lo, hi = min(lo, l), max(hi, h)
		}
		return lo, hi
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		rmin, rmax := repeatBounds(re)
		l, h := b.span(re.Sub[0])
		if rmax < 0 || rmax*h > unbounded {
			return rmin * l, unbounded
		}
		return rmin * l, rmax * h
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0, 0
	}
	return unbounded + 1, 0 // OpNoMatch and anything unknown
}

// repeatBounds are a repetition's least and most counts (-1: no most).
func repeatBounds(re *syntax.Regexp) (int, int) {
	switch re.Op {
	case syntax.OpStar:
		return 0, -1
	case syntax.OpPlus:
		return 1, -1
	case syntax.OpQuest:
		return 0, 1
	}
	return re.Min, re.Max
}

// gen writes a string of exactly n bytes that re matches.
func (b *keyBuilder) gen(re *syntax.Regexp, n int, out *strings.Builder) bool {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 && b.rng.IntN(2) == 0 {
			s = strings.ToUpper(s)
		}
		out.WriteString(s)
		return len(s) == n
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		c := b.pick(re)
		out.WriteByte(c)
		return c != 0 && n == 1
	case syntax.OpCapture:
		return b.gen(re.Sub[0], n, out)
	case syntax.OpConcat:
		return b.share(re.Sub, n, out)
	case syntax.OpAlternate:
		var fit []*syntax.Regexp
		for _, s := range re.Sub {
			if l, h := b.span(s); l <= n && n <= h {
				fit = append(fit, s)
			}
		}
		if len(fit) == 0 {
			return false
		}
		return b.gen(fit[b.rng.IntN(len(fit))], n, out)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		rmin, rmax := repeatBounds(re)
		l, h := b.span(re.Sub[0])
		// The fewest copies that can make n, at least rmin.
		count := rmin
		if h > 0 {
			count = max(rmin, (n+h-1)/h)
		}
		if rmax >= 0 && count > rmax || count*l > n {
			return false
		}
		if count == 0 {
			return n == 0
		}
		parts := make([]*syntax.Regexp, count)
		for i := range parts {
			parts[i] = re.Sub[0]
		}
		return b.share(parts, n, out)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return n == 0
	}
	return false
}

// share writes parts in order, n bytes in all: each gets its least length, and what remains
// is handed out at random to the parts that can take more.
func (b *keyBuilder) share(parts []*syntax.Regexp, n int, out *strings.Builder) bool {
	los, his := make([]int, len(parts)), make([]int, len(parts))
	total, room := 0, 0
	for i, p := range parts {
		los[i], his[i] = b.span(p)
		total += los[i]
		room += his[i] - los[i]
	}
	extra := n - total
	if extra < 0 || extra > room {
		return false
	}
	lens := append([]int(nil), los...)
	for extra > 0 {
		i := b.rng.IntN(len(parts))
		if lens[i] < his[i] {
			give := min(his[i]-lens[i], 1+b.rng.IntN(extra))
			lens[i] += give
			extra -= give
		}
	}
	for i, p := range parts {
		if !b.gen(p, lens[i], out) {
			return false
		}
	}
	return true
}

// pick is a character of the class re that the key's character set allows: a letter or a
// digit when the class has one, else any of its visible ASCII characters; 0 when there is none.
func (b *keyBuilder) pick(re *syntax.Regexp) byte {
	good, other := b.chars(re)
	switch {
	case len(good) > 0:
		return good[b.rng.IntN(len(good))]
	case len(other) > 0:
		return other[b.rng.IntN(len(other))]
	}
	return 0
}

// chars are the characters of the class re that the key's character set allows: letters and
// digits, and the other visible ASCII characters.
func (b *keyBuilder) chars(re *syntax.Regexp) (good, other []byte) {
	var ranges []rune
	switch re.Op {
	case syntax.OpCharClass:
		ranges = re.Rune
	default: // any character
		ranges = []rune{0x21, 0x7e}
	}
	for c := 0x21; c <= 0x7e; c++ {
		if !b.allow(byte(c)) || !inRanges(rune(c), ranges) {
			continue
		}
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			good = append(good, byte(c))
		} else {
			other = append(other, byte(c))
		}
	}
	return good, other
}

func inRanges(c rune, ranges []rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= c && c <= ranges[i+1] {
			return true
		}
	}
	return false
}
