package conform

import (
	"math/rand/v2"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestKeysForEveryRule: conform makes fresh, valid keys for the key rules APIs declare, built
// to the length bounds where sampling the pattern cannot reach them.
func TestKeysForEveryRule(t *testing.T) {
	uuid := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	for _, c := range []struct {
		name     string
		min, max int
		pattern  string
	}{
		{"printable ASCII 16-255", 16, 255, `^[!-~]+$`},
		{"printable ASCII at least 200", 200, 255, `^[!-~]+$`},
		{"no pattern", 16, 255, ``},
		{"UUID", 36, 36, `^` + uuid + `$`},
		{"UUID, unanchored, any length rule", 1, 255, uuid},
		{"ULID", 26, 26, `^[0-9A-HJKMNP-TV-Z]{26}$`},
		{"prefixed", 1, 255, `^stainless-go-` + uuid + `$`},
		{"bounded class", 30, 40, `^[a-z0-9]{20,40}$`},
		{"alternation", 10, 12, `^(pay|ref)_[A-Za-z0-9]{6,10}$`},
		{"case-insensitive prefix", 10, 64, `(?i)^key-[a-z]+$`},
		{"exactly one long key", 255, 255, `^[A-Za-z0-9_-]{255}$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := &model.Operation{ID: "op", Settings: model.Settings{Key: model.KeySettings{MinLength: c.min, MaxLength: c.max, Pattern: c.pattern}}}
			r := &runner{o: &Options{}, runID: "abc123"}
			o := &opRun{r: r, op: op, g: newValues(7), exp: expectationsFor(op, "")}
			o.keys = &keyBuilder{rng: rand.New(rand.NewPCG(1, 2)), allow: o.keyChars().Allows}
			seen := map[string]bool{}
			for i := 0; i < 20; i++ {
				k, err := o.newKey()
				if err != nil {
					t.Fatal(err)
				}
				if len(k) < c.min || len(k) > c.max || (c.pattern != "" && !o.g.matcher.Match(c.pattern, k)) || seen[k] {
					t.Fatalf("key %q (%d) is not a fresh key of %d to %d matching %s", k, len(k), c.min, c.max, c.pattern)
				}
				for j := 0; j < len(k); j++ {
					if !keyCharSet(defaults.KeyVisible).Allows(k[j]) {
						t.Fatalf("key %q has %q", k, k[j])
					}
				}
				seen[k] = true
			}
		})
	}
}
