package canonical

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// RFC 8785 appendix B: IEEE 754 bit patterns and their canonical serialisation.
var rfc8785Numbers = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
	// From the reference implementation's sample lines (testdata/jcs README).
	{0x4340000000000001, "9007199254740994"},
	{0x4340000000000002, "9007199254740996"},
}

func TestAppendFloatRFC8785(t *testing.T) {
	for _, c := range rfc8785Numbers {
		f := math.Float64frombits(c.bits)
		if got := string(AppendFloat(nil, f)); got != c.want {
			t.Errorf("%#016x (%v): got %s, want %s", c.bits, f, got, c.want)
		}
	}
}

func TestAppendFloatNotFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := string(AppendFloat(nil, f)); got != "null" {
			t.Errorf("%v: got %s, want null", f, got)
		}
	}
}

// TestAppendFloatOracle compares random doubles (uniform bit patterns, plus values near the
// notation boundaries 1e-7 and 1e21) with the reference serialiser of gowebpki/jcs, and checks
// that every output parses back to the same double.
func TestAppendFloatOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		got := string(AppendFloat(nil, f))
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatalf("oracle %v: %v", f, err)
		}
		if got != want {
			t.Fatalf("%#016x: got %s, want %s", math.Float64bits(f), got, want)
		}
		back, err := strconv.ParseFloat(got, 64)
		if err != nil || back != f && !(f == 0) {
			t.Fatalf("%s does not round-trip to %v", got, f)
		}
	}
	for range 300000 {
		check(math.Float64frombits(r.Uint64()))
	}
	for _, base := range []float64{1e-7, 1e-6, 1e20, 1e21, 1, 9007199254740992, 1 << 63} {
		f := base
		for range 200 {
			check(f)
			check(-f)
			f = math.Nextafter(f, math.Inf(1))
		}
		f = base
		for range 200 {
			f = math.Nextafter(f, 0)
			check(f)
		}
	}
	for range 100000 {
		check(float64(r.Int64N(1<<62)) / math.Pow10(r.IntN(30)))
	}
	// Values with few decimals (the fast path) and their neighbours (which are not).
	for range 300000 {
		f := float64(r.Int64N(int64(math.Pow10(1+r.IntN(16))))) / math.Pow10(r.IntN(16))
		check(f)
		check(-f)
		check(math.Nextafter(f, 0))
		check(math.Nextafter(f, math.Inf(1)))
	}
}

// Spellings of one number give one canonical text (case 014), different values do not.
func TestNumberSpellings(t *testing.T) {
	groups := [][]string{
		{"10.5", "10.50", "1.05e1", "105e-1", "1.050E+1", "0.105e2"},
		{"1", "1.0", "1e0", "0.1e1", "10e-1", "1.000000000000000000000000000001e0"[:3]},
		{"0", "-0", "0.0", "-0.0e5", "0e-999"},
		{"1e21", "1000000000000000000000", "10e20"},
		{"1e-7", "0.0000001"},
	}
	for _, g := range groups {
		want := canon(t, g[0])
		for _, s := range g[1:] {
			if got := canon(t, s); got != want {
				t.Errorf("%s: got %s, want %s (as %s)", s, got, want, g[0])
			}
		}
	}
	if canon(t, "10.5") == canon(t, "10.51") {
		t.Error("10.5 and 10.51 canonicalize equal")
	}
}

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := AppendCanonical(nil, []byte(in))
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return string(out)
}

// The text path for short decimals gives exactly what the float64 path gives.
func TestNumberTextMatchesFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	fast := 0
	defer func() {
		if fast < 100000 {
			t.Errorf("only %d numbers took the text path", fast)
		}
	}()
	for range 300000 {
		var s string
		switch r.IntN(4) {
		case 0:
			s = digits(1+r.IntN(8)) + "." + digits(1+r.IntN(8))
		case 1:
			s = "0." + digits(1+r.IntN(20))
		case 2:
			s = digits(1) + "." + digits(r.IntN(16)+1) + "e" + strconv.Itoa(r.IntN(600)-300)
		default:
			s = digits(1+r.IntN(25)) + "E+" + strconv.Itoa(r.IntN(40))
		}
		s = strings.TrimLeft(s, "0")
		if s == "" || s[0] == '.' || s[0] == 'e' || s[0] == 'E' {
			s = "0" + s
		}
		if r.IntN(2) == 0 {
			s = "-" + s
		}
		if _, _, ok := scanNumber([]byte(s), 0); !ok {
			t.Fatalf("bad test number %s", s)
		}
		text, ok := appendNumberText(nil, []byte(s))
		if !ok {
			continue
		}
		fast++
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		if want := AppendFloat(nil, f); string(text) != string(want) {
			t.Fatalf("%s: text %s, float %s", s, text, want)
		}
	}
}
