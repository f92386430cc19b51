package canonical

import (
	"math"
	"strconv"
)

// AppendFloat appends f as ECMAScript's Number::toString writes it (ECMA-262 section
// 6.1.6.1.20), which RFC 8785 section 3.2.2.3 adopts: the shortest digits that round-trip,
// plain notation for 1e-7 < |f| < 1e21, exponent notation ("1e+21", "1.5e-7") outside, and
// "0" for both zeros. NaN and ±Inf have no JSON form; like JSON.stringify, AppendFloat writes
// null for them (a Decoder never produces them).
func AppendFloat(b []byte, f float64) []byte {
	switch {
	case f == 0:
		return append(b, '0')
	case math.IsNaN(f) || math.IsInf(f, 0):
		return append(b, "null"...)
	case f == math.Trunc(f) && math.Abs(f) <= 1<<53:
		// Up to 2^53 doubles are at most 1 apart, so an integral value needs all its digits
		// and prints as the integer (larger ones may print shorter digits padded with zeros).
		return strconv.AppendInt(b, int64(f), 10)
	}
	if out, ok := appendShortDecimal(b, f); ok {
		return out
	}
	// Shortest round-trip digits from strconv ("-d.ddddde±xx"); the layout below is ours.
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	if s[0] == '-' {
		b = append(b, '-')
		s = s[1:]
	}
	var digits [17]byte
	k := 0
	i := 0
	for ; s[i] != 'e'; i++ {
		if s[i] != '.' {
			digits[k] = s[i]
			k++
		}
	}
	exp := 0
	eneg := s[i+1] == '-'
	for _, c := range s[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if eneg {
		exp = -exp
	}
	return appendDigits(b, digits[:k], exp+1)
}

// appendDigits lays out significant digits d (no leading or trailing zeros) of a value
// 0.d × 10^n as ECMA-262 Number::toString does (steps 6 to 10 of section 6.1.6.1.20).
func appendDigits(b, d []byte, n int) []byte {
	k := len(d)
	switch {
	case k <= n && n <= 21:
		b = append(b, d...)
		for ; n > k; n-- {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for ; n < 0; n++ {
			b = append(b, '0')
		}
		b = append(b, d...)
	default:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// appendNumberText appends the canonical form of a grammar-checked JSON number directly from
// its text when it has at most 15 significant digits and a moderate exponent: such a decimal
// survives the round trip through a double (15 digits is DBL_DIG), so no shorter decimal
// names the same double and its own digits, trailing zeros removed, are the shortest. It
// reports false for the other numbers, which go through a float64.
func appendNumberText(b, num []byte) ([]byte, bool) {
	var digits [15]byte
	k := 0     // significant digits kept
	point := 0 // value = 0.digits × 10^point, before the exponent
	i := 0
	neg := num[0] == '-'
	if neg {
		i++
	}
	seenNonZero := false
	intPart := true
	for ; i < len(num); i++ {
		c := num[i]
		if c == '.' {
			intPart = false
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if c == '0' && !seenNonZero {
			if !intPart {
				point--
			}
			continue
		}
		seenNonZero = true
		if intPart {
			point++
		}
		if k == len(digits) {
			if c != '0' {
				return b, false // more than 15 significant digits
			}
			continue // a trailing zero beyond the buffer
		}
		digits[k] = c
		k++
	}
	if !seenNonZero {
		return append(b, '0'), true
	}
	if i < len(num) {
		i++
		eneg := false
		if num[i] == '+' || num[i] == '-' {
			eneg = num[i] == '-'
			i++
		}
		e := 0
		for ; i < len(num); i++ {
			e = e*10 + int(num[i]-'0')
			if e > 1000 {
				return b, false
			}
		}
		if eneg {
			e = -e
		}
		point += e
	}
	for k > 0 && digits[k-1] == '0' {
		k--
	}
	// Stay well inside the normal range: 1e-290 < |value| < 1e290.
	if point < -290 || point > 290 {
		return b, false
	}
	if neg {
		b = append(b, '-')
	}
	return appendDigits(b, digits[:k], point), true
}

// pow10 are the powers of ten that are exact doubles.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// appendShortDecimal is the fast path for values with few decimals (prices, rates): it finds
// the fewest decimal places k such that some integer n has n/10^k rounding to |f|, and writes
// n with the point k digits from the right. Why this is the ECMAScript form: n < 2^50 and 10^k
// are exact doubles, so n/10^k is correctly rounded and the test is exact; |f|·10^k computed
// in floating point is within 3/16 of n, so rounding it finds n whenever one exists, and no
// second integer can round to f at that scale; fewest places means fewest significant
// digits. Values outside 1e-6 ≤ |f| < 1e15, or needing more precision, take the general path.
func appendShortDecimal(b []byte, f float64) ([]byte, bool) {
	a := math.Abs(f)
	if a < 1e-6 || a >= 1e15 {
		return b, false
	}
	for k := 1; k < len(pow10); k++ {
		s := a * pow10[k]
		if s >= 1<<50 {
			return b, false
		}
		n := math.Round(s)
		if n/pow10[k] != a {
			continue
		}
		if f < 0 {
			b = append(b, '-')
		}
		var tmp [24]byte
		d := strconv.AppendUint(tmp[:0], uint64(n), 10)
		if len(d) > k {
			b = append(b, d[:len(d)-k]...)
			b = append(b, '.')
			return append(b, d[len(d)-k:]...), true
		}
		b = append(b, '0', '.')
		for i := len(d); i < k; i++ {
			b = append(b, '0')
		}
		return append(b, d...), true
	}
	return b, false
}

// reasonInexact is why a number that a double cannot hold exactly is refused.
const reasonInexact = "number cannot be represented exactly as an IEEE 754 double, and RFC 8785 " +
	"section 3.2.2.3 canonicalizes numbers as doubles (see also I-JSON, RFC 7493 section 2.2), so " +
	"a different number would be fingerprinted and handled; send it as a string, or declare the field integer"

// exactDouble reports whether the grammar-checked JSON number num may be canonicalized as the
// double f it parses to without answering for a number the client did not send.
//
// RFC 8785 section 3.2.2.3 reads every number as an IEEE 754 double, and a double holds 17
// significant decimal digits: any spelling with at most 17 significant digits (10.5, 10.50,
// 1.05e1, 0.1, 1e21, the RFC's own 333333333.33333329) is the rounding every JCS implementation
// and every double-based client performs, and is accepted. A spelling with more significant
// digits than a double can hold is accepted only when its digits, trailing zeros stripped and
// exponent normalised, are exactly those of f's shortest form; otherwise
// (123456789012345678901234567890, 3.14159265358979323846) two different client values would
// share one canonical form, and a replay would answer a request the client never sent. A
// nonzero number that underflows to 0 (1e-400) is refused for the same reason.
func exactDouble(num []byte, f float64) bool {
	if f != 0 && significantDigits(num) <= 17 {
		return true
	}
	d, n, point := shortestDigits(f)
	return sameDecimal(num, d[:n], point)
}

// significantDigits counts the digits of a grammar-checked JSON number from its first nonzero
// digit to its last nonzero digit, exponent excluded (0 for zero).
func significantDigits(num []byte) int {
	first, last, pos := -1, -1, 0
	for _, c := range num {
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if c != '0' {
			if first < 0 {
				first = pos
			}
			last = pos
		}
		pos++
	}
	if first < 0 {
		return 0
	}
	return last - first + 1
}

// shortPlainDecimal reports, without parsing, that num is surely exact: at most 15 characters
// and no exponent means at most 15 significant digits (DBL_DIG) between 1e-14 and 1e15, and
// such a decimal is its double's shortest form (see appendNumberText).
func shortPlainDecimal(num []byte) bool {
	if len(num) > 15 {
		return false
	}
	for _, c := range num {
		if c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// shortestDigits returns the significant digits of the shortest decimal that round-trips to
// |f| (strconv's shortest form, which ECMA-262 Number::toString also uses) and the point of
// value = 0.d × 10^point; n is 0 for zero.
func shortestDigits(f float64) (d [17]byte, n, point int) {
	if f == 0 {
		return d, 0, 0
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], math.Abs(f), 'e', -1, 64) // "d.dddde±xx"
	i := 0
	for ; s[i] != 'e'; i++ {
		if s[i] != '.' {
			d[n] = s[i]
			n++
		}
	}
	exp := 0
	for _, c := range s[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if s[i+1] == '-' {
		exp = -exp
	}
	return d, n, exp + 1
}

// sameDecimal reports whether the grammar-checked JSON number num has, sign aside, exactly the
// significant digits want (no leading or trailing zeros; empty for zero) and the point of
// value = 0.want × 10^point.
func sameDecimal(num, want []byte, point int) bool {
	k := 0            // digits of want matched so far
	p := int64(0)     // num's point before its exponent
	pendingZeros := 0 // zeros seen after the last matched digit, not yet known to be trailing
	seenNonZero, intPart := false, true
	i := 0
	for ; i < len(num); i++ {
		c := num[i]
		if c == '-' {
			continue
		}
		if c == '.' {
			intPart = false
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if c == '0' && !seenNonZero {
			if !intPart {
				p--
			}
			continue
		}
		seenNonZero = true
		if intPart {
			p++
		}
		if c == '0' {
			pendingZeros++
			continue
		}
		// A nonzero digit: the zeros before it are significant, and so is it.
		for ; pendingZeros > 0; pendingZeros-- {
			if k == len(want) || want[k] != '0' {
				return false
			}
			k++
		}
		if k == len(want) || want[k] != c {
			return false
		}
		k++
	}
	if k != len(want) {
		return false
	}
	if !seenNonZero {
		return true // zero in any spelling, whatever its exponent
	}
	if i < len(num) { // exponent
		i++
		neg := false
		if num[i] == '+' || num[i] == '-' {
			neg = num[i] == '-'
			i++
		}
		e := int64(0)
		for ; i < len(num); i++ {
			if e < 1<<40 { // far outside any double's exponent, and no overflow
				e = e*10 + int64(num[i]-'0')
			}
		}
		if neg {
			e = -e
		}
		p += e
	}
	return p == int64(point)
}
