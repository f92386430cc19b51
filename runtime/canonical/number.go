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
	// ECMA-262 names the decimal point position n: value = 0.d1d2…dk × 10^n.
	n := exp + 1
	d := digits[:k]
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
