package canonical

import "testing"

// The re-encoding writes what the decoder read: compact, in the document's order, integers as
// their digits whatever their spelling, numbers and generic values in canonical form, strings
// minimally escaped; and Undeclared refuses a name that equals a declared one up to case.
func TestReencode(t *testing.T) {
	const doc = "{ \"amount\" : 1.5e3, \"to\":\"caf\\u00e9\\/x\", \"rate\": 1.50, \"ok\": true, \"none\": null," +
		" \"tags\": [ \"a\", \"b\" ], \"zz\": {\"b\": 2.0, \"a\": [1E0]}, \"nested\": {\"n\": -0}, \"skip\": [ 1 , 2 ] }"
	var d Decoder
	d.Reset([]byte(doc))
	d.Reencode()
	for d.BeginObject(); d.NextMember(); {
		switch string(d.Name()) {
		case "amount":
			if d.Int64() != 1500 {
				t.Error("amount")
			}
		case "to":
			d.Str()
		case "rate":
			d.Float64()
		case "ok":
			d.Bool()
		case "none":
			d.Null()
		case "tags":
			for d.BeginArray(); d.NextElement(); {
				d.Str()
			}
			d.EndArray()
		case "zz":
			d.Unknown(&Members{}, "amount")
		case "nested":
			for d.BeginObject(); d.NextMember(); {
				d.Int64()
			}
			d.EndObject()
		case "skip":
			d.Skip()
		}
	}
	d.EndObject()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	const want = `{"amount":1500,"to":"café/x","rate":1.5,"ok":true,"none":null,"tags":["a","b"],"zz":{"a":[1],"b":2},"nested":{"n":0},"skip":[1,2]}`
	if got := string(d.Reencoded()); got != want {
		t.Errorf("re-encoding\n got %s\nwant %s", got, want)
	}
	d.Reset([]byte(`{"AMOUNT":1}`))
	if d.Reencoded() != nil {
		t.Error("Reset keeps the re-encoding on")
	}
	for d.BeginObject(); d.NextMember(); {
		d.Unknown(&Members{}, "currency", "amount")
	}
	d.EndObject()
	err := d.Finish()
	if e, ok := err.(*Error); !ok || e.Pointer != "/AMOUNT" || e.Offset != 1 {
		t.Errorf("case variant: %v", err)
	}
	if FoldsTo("amount", []string{"amount"}) != "" || FoldsTo("\u212aey", []string{"key"}) != "key" {
		t.Error("FoldsTo: an equal name folds, or the Kelvin sign does not")
	}
}
