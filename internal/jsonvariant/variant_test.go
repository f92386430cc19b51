package jsonvariant

import (
	"bytes"
	"testing"

	"github.com/gowebpki/jcs"
)

// A variant is the same JSON value (gowebpki/jcs, the test-only RFC 8785 oracle, gives it the
// same canonical form), spelled differently for most seeds, and the same bytes for the same seed.
func TestVariantIsEquivalent(t *testing.T) {
	docs := []string{
		`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"a/b":"c\"d\\e"}`,
		`[333333333.33333329, 1E30, 4.50, 2e-3, -0, 1e21, 0.000001, 0, true, false, null, [], {}]`,
	}
	for _, doc := range docs {
		want, err := jcs.Transform([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for seed := range uint64(50) {
			v, ok := Of([]byte(doc), seed)
			if !ok {
				t.Fatalf("%s: refused", doc)
			}
			got, err := jcs.Transform(v)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("variant %s of %s:\n got %s (%v)\nwant %s", v, doc, got, err, want)
			}
			if again, _ := Of([]byte(doc), seed); !bytes.Equal(again, v) {
				t.Fatalf("seed %d gives two variants", seed)
			}
			if !bytes.Equal(v, []byte(doc)) {
				changed++
			}
		}
		if changed < 45 {
			t.Errorf("%s: only %d of 50 variants differ from the input", doc, changed)
		}
	}
	if _, ok := Of([]byte(`{"a":`), 1); ok {
		t.Error("a truncated document has a variant")
	}
}
