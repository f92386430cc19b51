package canonical

import "testing"

// appendPoint is a canonicalizer written the way the generator writes them.
func appendPoint(b []byte, v *point) []byte {
	o, b := WriteObject(b, v.Extra)
	b = OptMap(&o, b, `"attrs":`, v.Attrs, AppendInt)
	b = o.String(b, `"kind":`, v.Kind)
	b = OptString(&o, b, `"label":`, v.Label)
	b = OptArray(&o, b, `"tags":`, v.Tags, AppendString)
	b = o.Int(b, `"x":`, v.X)
	b = o.Int(b, `"y":`, v.Y)
	return o.End(b)
}

func TestObjectWriterMatchesGeneric(t *testing.T) {
	for _, in := range []string{
		`{"x":1,"y":2,"kind":"a"}`,
		`{"x":1,"y":2,"kind":"b","label":"l","tags":[],"attrs":{"b":1,"a":2}}`,
		// Undeclared members sort between the declared ones, before, after and in between.
		`{"x":1,"y":2,"kind":"b","a":0,"kz":[1,{"b":1,"a":2}],"z":null,"label":"l","tags":["t"],"\u20ac":1,"\ud83d\ude00":2}`,
		`{"y":2,"x":1,"kind":"a","x0":true,"attrs0":"s","labek":1}`,
	} {
		var d Decoder
		d.SetMatcher(matchFunc(func(string, string) bool { return true }))
		d.Reset([]byte(in))
		var v point
		decodePoint(&d, &v)
		if err := d.Finish(); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		want, err := AppendCanonical(nil, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendPoint([]byte("prefix"), &v); string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s\nwant prefix%s", in, got, want)
		}
	}
}

func TestObjectWriterEscapedNames(t *testing.T) {
	// A declared name that needs escaping is passed escaped; undeclared members still sort by
	// the unescaped name: a"b sorts between a! and a# (by its '"'), not after a$ (by a '\\').
	extra := Members{{Name: "a!", Value: []byte("1")}, {Name: "a#", Value: []byte("2")}, {Name: "a$", Value: []byte("3")}}
	o, b := WriteObject(nil, extra)
	b = o.Null(b, `"a\"b":`)
	b = o.Bool(b, `"b":`, true)
	b = o.Raw(b, `"c":`, []byte(`[1]`))
	b = o.Float(b, `"d":`, 1.5)
	b = o.End(b)
	if want := `{"a!":1,"a\"b":null,"a#":2,"a$":3,"b":true,"c":[1],"d":1.5}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	o, b = WriteObject(nil, nil)
	if b = o.End(b); string(b) != "{}" {
		t.Errorf("empty object %s", b)
	}
}

func TestMapMembersAndArrays(t *testing.T) {
	x := MapMembers(map[string]int64{"b": 2, "a": 1, "skip": 3}, AppendInt, "skip")
	if len(x) != 2 || x[0].Name != "a" || string(x[1].Value) != "2" {
		t.Errorf("MapMembers: %+v", x)
	}
	type color string
	b := AppendArray(nil, []color{"red", "g\"reen"}, AppendStringOf[color])
	b = AppendArray(b, []int32{-1, 2}, AppendIntOf[int32])
	b = AppendObjects(b, []point{{X: 1, Kind: "k"}}, appendPoint)
	if want := `["red","g\"reen"][-1,2][{"kind":"k","x":1,"y":0}]`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestFramerRelease(t *testing.T) {
	var f Framer
	f.Begin("op", "POST", "/x")
	f.Release()
	f.Release() // releasing twice does nothing
	f.Begin("op", "POST", "/x")
	f.MediaType("")
	a := f.Sum()
	var g Framer
	g.Begin("op", "POST", "/x")
	g.MediaType("")
	if b := g.Sum(); a != b {
		t.Error("a Framer reused after Release frames differently")
	}
}
