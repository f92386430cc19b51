package canonical

import (
	"testing"

	"github.com/gowebpki/jcs"
)

func TestSmoke(t *testing.T) {
	for _, in := range []string{
		`{"b":1,"a":[1.0,2e3,"x\u00e9\/",null,true,false,{}],"c":{"z":1,"y":-0}}`,
		`{"\u20ac":1,"\r":2,"1":3,"\u0080":4,"\ud83d\ude00":5,"\ufb33":6}`,
		`[1e21,1e-7,123456789012345678,0.000001,-1.5e-300,5e-324]`,
	} {
		got, err := AppendCanonical(nil, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
	for _, in := range []string{`{"a":1,"a":2}`, `{"x":{"b":1,"a":2,"b":3}}`, `"\ud800"`, `"\udc00\ud800"`, "\"\xff\"", `1e400`, `{} x`, `[1,]`} {
		_, err := AppendCanonical(nil, []byte(in))
		t.Logf("%s: %v", in, err)
		if err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}
