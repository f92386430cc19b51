package canonical

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Newcomer report: two different numbers in an any-typed subtree rounded to the same double,
// so the second request replayed the first. Such numbers are refused where they are, in the
// generic canonicalizer (additionalProperties, oneOf, untyped) and in schema number fields.
func TestInexactNumbersRefused(t *testing.T) {
	inexact := []string{
		"123456789012345678901234567890",
		"123456789012345678901234567891",
		"3.14159265358979323846", // 21 significant digits: more than a double holds
		"1.00000000000000000000000000000000000001",
		"1e-400",                  // underflows to 0
		"1797693134862315708e290", // MaxFloat64 is 1.7976931348623157e308, not this
	}
	for _, n := range inexact {
		assertInexact(t, `{"meta":{"n":`+n+`}}`, "/meta/n")
		assertInexact(t, `[1,`+n+`]`, "/1")
		_, err := decodeOne(t, n, (*Decoder).Float64)
		var e *Error
		if !errors.As(err, &e) || e.Reason != reasonInexact {
			t.Errorf("Float64(%s): %v, want the inexact-number refusal", n, err)
		}
	}
	if err := func() error { _, err := AppendCanonical(nil, []byte("1e-400")); return err }(); err == nil ||
		!strings.Contains(err.Error(), "IEEE 754 double") || !strings.Contains(err.Error(), "integer") ||
		!strings.Contains(err.Error(), "string") {
		t.Errorf("reason %v does not name the double or suggest a string or integer", err)
	}

	exact := map[string]string{
		"10.5": "10.5", "10.50": "10.5", "1.05e1": "10.5", "105e-1": "10.5", "0.1": "0.1",
		"1e21": "1e+21", "1000000000000000000000": "1e+21", "0.30000000000000004": "0.30000000000000004",
		"9007199254740992": "9007199254740992", "5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308",
		"123456789012345680000000000000": "1.2345678901234568e+29", "-0.0": "0", "0e-999": "0",
		"100000000000000000000000000000": "1e+29", "1.2345678901234568e-300": "1.2345678901234568e-300",
		// At most 17 significant digits: RFC 8785 rounds them to the double, as every client does.
		"0.30000000000000001": "0.3", "9007199254740993": "9007199254740992", "-9007199254740993": "-9007199254740992",
		"333333333.33333329": "333333333.3333333", "4.9406564584124654e-324": "5e-324",
	}
	for in, want := range exact {
		if got := canon(t, `{"meta":{"n":`+in+`}}`); got != `{"meta":{"n":`+want+`}}` {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
		f, err := decodeOne(t, in, (*Decoder).Float64)
		if err != nil || string(AppendFloat(nil, f)) != want {
			t.Errorf("Float64(%s): %v %v, want %s", in, f, err, want)
		}
	}
}

// exactDouble against an independent oracle: a decimal of more than 17 significant digits (or
// one that underflows to zero) is accepted only when, as a rational number, it equals the
// shortest round-trip decimal of the double it parses to.
func TestExactDoubleOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(num string) {
		f, ok := parseFloat([]byte(num))
		if !ok {
			return
		}
		in, ok1 := new(big.Rat).SetString(num)
		short, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'e', -1, 64))
		if !ok1 || !ok2 {
			t.Fatalf("oracle cannot read %s", num)
		}
		// At most 17 significant digits round like RFC 8785 says; more must be the double's own digits.
		want := (f != 0 && significantDigits([]byte(num)) <= 17) || in.Cmp(short) == 0
		if got := exactDouble([]byte(num), f); got != want {
			t.Errorf("exactDouble(%s) = %v, oracle %v", num, got, want)
		}
		// The generic canonicalizer agrees, and writes what AppendFloat writes.
		out, err := AppendCanonical(nil, []byte(num))
		if want && (err != nil || string(out) != string(AppendFloat(nil, f))) {
			t.Errorf("AppendCanonical(%s) = %s %v, AppendFloat %s", num, out, err, AppendFloat(nil, f))
		}
		if !want && err == nil {
			t.Errorf("AppendCanonical(%s) accepted %s", num, out)
		}
	}
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		// Its own spellings are exact; longer expansions usually are not; nudged last digits are not.
		check(strconv.FormatFloat(f, 'e', -1, 64))
		check(strconv.FormatFloat(f, 'e', 16+r.IntN(6), 64))
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		check(mant + "000e" + exp)
		check(mant + "1e" + exp)
		check("-" + strings.TrimPrefix(mant, "-") + "00e" + exp)
		if g := math.Abs(f); g >= 1e-7 && g < 1e21 {
			check(strconv.FormatFloat(f, 'f', -1, 64))
		}
		// Short decimals of every magnitude, the common case.
		check(strconv.Itoa(r.IntN(1e9)) + "." + strconv.Itoa(r.IntN(1e9)) + "e" + strconv.Itoa(r.IntN(600)-300))
	}
}
