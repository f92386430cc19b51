package gen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// The types and decoders below are what the generator writes for a Stripe-style form body
// (golden/form has the generated ones): a map and a struct that may be sent empty to unset
// them, an array of structs, an array of scalars, an open root and a closed nested object.
type treeCharge struct {
	Amount   int64
	Currency string
	Metadata *canonical.Unsettable[map[string]string]
	Items    []treeItem
	Shipping *canonical.Unsettable[treeShipping]
	Expand   []string
	Extra    canonical.Members
}

type treeItem struct {
	Price    string
	Quantity *int64
}

type treeShipping struct {
	Name    string
	Address *treeAddress
}

type treeAddress struct {
	City, Line1 *string
	Lines       map[string][]string
}

func decodeTreeCharge(f *FormTree, v *treeCharge) {
	var seen uint64
	for f.BeginObject(); f.NextMember(); {
		switch f.Key() {
		case "amount":
			v.Amount = f.Scalar(&seen, 0).Int64()
		case "currency":
			v.Currency = f.Scalar(&seen, 1).Str()
			f.Length(v.Currency, 3, 3)
		case "metadata":
			v.Metadata = new(canonical.Unsettable[map[string]string])
			if v.Metadata.Unset = f.Field(&seen, 2).Unset(); !v.Metadata.Unset {
				v.Metadata.Value = map[string]string{}
				for f.BeginObject(); f.NextMember(); {
					v.Metadata.Value[f.Key()] = f.Text().Str()
				}
				f.EndObject()
			}
		case "items":
			v.Items = []treeItem{}
			for f.Field(&seen, 3).BeginArray(); f.NextElement(); {
				decodeTreeItem(f, canonical.Grow(&v.Items))
			}
			f.EndArray()
			f.Items(len(v.Items), -1, 20)
		case "shipping":
			v.Shipping = new(canonical.Unsettable[treeShipping])
			if v.Shipping.Unset = f.Field(&seen, 4).Unset(); !v.Shipping.Unset {
				decodeTreeShipping(f, &v.Shipping.Value)
			}
		case "expand":
			v.Expand = []string{}
			for f.Field(&seen, 5).BeginArray(); f.NextElement(); {
				v.Expand = append(v.Expand, f.Text().Str())
			}
			f.EndArray()
		default:
			f.Unknown(&v.Extra)
		}
	}
	f.EndObject()
	f.Required(seen, "amount", "currency")
}

func decodeTreeItem(f *FormTree, v *treeItem) {
	var seen uint64
	for f.BeginObject(); f.NextMember(); {
		switch f.Key() {
		case "price":
			v.Price = f.Scalar(&seen, 0).Str()
		case "quantity":
			v.Quantity = canonical.Ptr(f.Scalar(&seen, 1).Int64())
			f.Min(*v.Quantity, 1)
		default:
			f.Reject()
		}
	}
	f.EndObject()
	f.Required(seen, "price")
}

func decodeTreeShipping(f *FormTree, v *treeShipping) {
	var seen uint64
	for f.BeginObject(); f.NextMember(); {
		switch f.Key() {
		case "name":
			v.Name = f.Scalar(&seen, 0).Str()
		case "address":
			v.Address = new(treeAddress)
			f.Field(&seen, 1)
			decodeTreeAddress(f, v.Address)
		default:
			f.Reject()
		}
	}
	f.EndObject()
	f.Required(seen, "name")
}

func decodeTreeAddress(f *FormTree, v *treeAddress) {
	var seen uint64
	for f.BeginObject(); f.NextMember(); {
		switch f.Key() {
		case "city":
			v.City = canonical.Ptr(f.Scalar(&seen, 0).Str())
		case "line1":
			v.Line1 = canonical.Ptr(f.Scalar(&seen, 1).Str())
		case "lines":
			v.Lines = map[string][]string{}
			for f.Field(&seen, 2).BeginObject(); f.NextMember(); {
				k := f.Key()
				var e []string
				for f.BeginArray(); f.NextElement(); {
					e = append(e, f.Text().Str())
				}
				f.EndArray()
				v.Lines[k] = e
			}
			f.EndObject()
		default:
			f.Reject()
		}
	}
	f.EndObject()
}

func decodeTree(body string) (treeCharge, error) {
	in := newInput("/x", body)
	var v treeCharge
	decodeTreeCharge(in.FormTree(), &v)
	return v, in.Err()
}

// case025 is the body of testdata/cases/025-form-deep-object-fields.yaml.
const case025 = "amount=2500&currency=usd&metadata[order_id]=6735&metadata[channel]=web&items[0][price]=price_A&items[0][quantity]=2&items[1][price]=price_B&shipping[name]=Ada&shipping[address][city]=Paris"

func TestFormTreeDecodes(t *testing.T) {
	v, err := decodeTree(case025)
	if err != nil {
		t.Fatal(err)
	}
	want := treeCharge{
		Amount: 2500, Currency: "usd",
		Metadata: &canonical.Unsettable[map[string]string]{Value: map[string]string{"order_id": "6735", "channel": "web"}},
		Items:    []treeItem{{Price: "price_A", Quantity: canonical.Ptr(int64(2))}, {Price: "price_B"}},
		Shipping: &canonical.Unsettable[treeShipping]{Value: treeShipping{Name: "Ada", Address: &treeAddress{City: canonical.Ptr("Paris")}}},
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("decoded\n%s\nwant\n%s", js(v), js(want))
	}
	// Field order is free and percent-encoded brackets are brackets: the same value.
	for _, body := range []string{
		"shipping%5Baddress%5D%5Bcity%5D=Paris&items[1][price]=price_B&metadata%5Bchannel%5D=web&shipping[name]=Ada&items[0][quantity]=2&currency=usd&items[0][price]=price_A&metadata[order_id]=6735&amount=2500",
		"items%5b1%5d%5bprice%5d=price_B&" + strings.Replace(case025, "&items[1][price]=price_B", "", 1),
	} {
		if got, err := decodeTree(body); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n%s (%v)", body, js(got), err)
		}
	}
	// Swapping the elements of an array is another value.
	got, err := decodeTree("amount=2500&currency=usd&metadata[order_id]=6735&metadata[channel]=web&items[0][price]=price_B&items[1][price]=price_A&items[1][quantity]=2&shipping[name]=Ada&shipping[address][city]=Paris")
	if err != nil || got.Items[0].Price != "price_B" || reflect.DeepEqual(got, want) {
		t.Errorf("swapped items: %s (%v)", js(got), err)
	}
}

func TestFormTreeArrays(t *testing.T) {
	var b strings.Builder
	b.WriteString("amount=1&currency=usd")
	for i := 11; i >= 0; i-- { // indices past 9 sort by value, not as text
		fmt.Fprintf(&b, "&items[%d][price]=p%d", i, i)
	}
	v, err := decodeTree(b.String())
	if err != nil || len(v.Items) != 12 {
		t.Fatalf("%s: %v", js(v.Items), err)
	}
	for i, it := range v.Items {
		if it.Price != fmt.Sprintf("p%d", i) {
			t.Errorf("items[%d] = %s", i, it.Price)
		}
	}
	for body, want := range map[string]string{
		"expand[]=b&expand[]=a":                   "b,a", // without indices: body order
		"expand=b&expand=a":                       "b,a",
		"expand[1]=b&expand[0]=a":                 "a,b", // with indices: index order
		"expand%5B1%5D=b&expand%5B0%5D=a":         "a,b",
		"expand[]=":                               "",
		"expand[2]=c&expand[0]=a&expand%5B1%5D=b": "a,b,c",
	} {
		v, err := decodeTree("amount=1&currency=usd&" + body)
		if err != nil || strings.Join(v.Expand, ",") != want {
			t.Errorf("%s: %q (%v), want %q", body, v.Expand, err, want)
		}
	}
	// Arrays nest in maps (any depth the schema allows).
	v, err = decodeTree("amount=1&currency=usd&shipping[name]=A&shipping[address][lines][home][1]=b&shipping[address][lines][home][0]=a&shipping[address][lines][work][]=w")
	if lines := v.Shipping.Value.Address.Lines; err != nil || strings.Join(lines["home"], ",") != "a,b" || strings.Join(lines["work"], ",") != "w" {
		t.Errorf("nested arrays: %s (%v)", js(v.Shipping), err)
	}
}

func TestFormTreeUnset(t *testing.T) {
	states := map[string]string{}
	for _, body := range []string{
		"amount=1&currency=usd",
		"amount=1&currency=usd&metadata=",
		"amount=1&currency=usd&metadata[a]=1",
		"amount=1&currency=usd&metadata[a]=",
		"amount=1&currency=usd&shipping=",
		"amount=1&currency=usd&shipping[name]=A",
	} {
		v, err := decodeTree(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		states[body] = js(v)
	}
	for body, want := range map[string]string{
		"amount=1&currency=usd":               `"Metadata":null`,
		"amount=1&currency=usd&metadata=":     `"Metadata":{"Value":null,"Unset":true}`,
		"amount=1&currency=usd&metadata[a]=1": `"Metadata":{"Value":{"a":"1"},"Unset":false}`,
		"amount=1&currency=usd&metadata[a]=":  `"Metadata":{"Value":{"a":""},"Unset":false}`, // one key unset: an empty value
		"amount=1&currency=usd&shipping=":     `"Shipping":{"Value":{"Name":"","Address":null},"Unset":true}`,
	} {
		if !strings.Contains(states[body], want) {
			t.Errorf("%s: %s, want %s", body, states[body], want)
		}
	}
}

func TestFormTreeOpenObject(t *testing.T) {
	v, err := decodeTree("amount=1&currency=usd&zeta[b][]=2&zeta[b][]=1&alpha=x&alpha=y&mid[k]=v&mid[0]=z&one=1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range v.Extra {
		got = append(got, m.Name+"="+string(m.Value))
	}
	want := `alpha=["x","y"] mid={"0":"z","k":"v"} one="1" zeta={"b":["2","1"]}`
	if strings.Join(got, " ") != want {
		t.Errorf("extra members %s, want %s", strings.Join(got, " "), want)
	}
	// A recursive schema follows the brackets as deep as they go: bounded like JSON's nesting.
	in := newInput("/x", "n"+strings.Repeat("[n]", canonical.MaxDepth+2)+"=1")
	var walk func(f *FormTree)
	walk = func(f *FormTree) {
		for f.BeginObject(); f.NextMember(); {
			walk(f)
		}
		f.EndObject()
	}
	walk(in.FormTree())
	if err := in.Err(); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep recursive fields: %v", err)
	}
	deep := "amount=1&currency=usd&x" + strings.Repeat("[a]", canonical.MaxDepth+2) + "=1"
	if _, err := decodeTree(deep); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep undeclared field: %v", err)
	}
}

func TestFormTreeRefuses(t *testing.T) {
	for _, tt := range []struct{ body, at, reason string }{
		{"amount=1&currency=usd&items[0][price]=a&items[2][price]=b", "/items[1]", "array index 1 is missing (the indices of items[2][price] must run 0, 1, 2, … without gaps)"},
		{"amount=1&currency=usd&items[1][price]=a", "/items[0]", "array index 0 is missing (the indices of items[1][price] must run 0, 1, 2, … without gaps)"},
		{"amount=1&currency=usd&items[0][price]=a&items[0][price]=b", "/items[0][price]", "field given more than once"},
		{"amount=1&currency=usd&items[x][price]=a", "/items[x][price]", "[x] is not an array index (0, 1, 2, …)"},
		{"amount=1&currency=usd&items[-1][price]=a", "/items[-1][price]", "[-1] is not an array index (0, 1, 2, …)"},
		{"amount=1&currency=usd&items[0][price]=a&items[01][price]=b", "/items[01][price]", "array index 01 has a leading zero"},
		{"amount=1&currency=usd&items[][price]=a", "/items[][price]", "an element without an index cannot have bracketed fields: number the elements (items[0][…])"},
		{"amount=1&currency=usd&expand[]=a&expand[0]=b", "/expand[0]", "mixes unindexed (expand[]) and indexed elements"},
		{"amount=1&currency=usd&expand=a&expand[0]=b", "/expand", "given both as a value and as bracketed fields (expand[0])"},
		{"amount=1&currency=usd&items=a", "/items", "must be sent as bracketed fields (items[…]=…)"},
		{"amount=1&currency=usd&metadata[k]=1&metadata[k]=2", "/metadata[k]", "field given more than once"},
		{"amount=1&currency=usd&metadata=&metadata[k]=2", "/metadata", "given both as a value and as bracketed fields (metadata[k])"},
		{"amount=1&currency=usd&metadata=x", "/metadata", "must be sent as bracketed fields (metadata[…]=…)"},
		{"amount=1&currency=usd&metadata[k][j]=1", "/metadata[k][j]", "field not allowed by the schema"},
		{"amount=1&currency=usd&shipping[name]=Ada&shipping[planet]=Mars", "/shipping[planet]", "field not allowed by the schema"},
		{"amount=1&currency=usd&shipping[name]=A&shipping[address][city][x]=1", "/shipping[address][city][x]", "field not allowed by the schema"},
		{"amount=1&currency=usd&shipping[address][city]=P", "/shipping[name]", "missing required field"},
		{"amount=1&currency=usd&items[0][quantity]=2", "/items[0][price]", "missing required field"},
		{"amount=1&currency=usd&items[0][price]=a&items[0][quantity]=0", "/items[0][quantity]", "must be at least 1"},
		{"amount=1&amount=2&currency=usd", "/amount", "field given more than once"},
		{"amount[x]=1&currency=usd", "/amount[x]", "field not allowed by the schema"},
		{"amount=x&currency=usd", "/amount", "must be an integer (int64)"},
		{"currency=usd", "/amount", "missing required field"},
		{"amount=1&currency=us", "/currency", "length must be 3"},
		{"amount=1&currency=usd&items[%zz]=1", "/items[", "'%' not followed by two hex digits"},
		// Brackets that do not parse, whatever the name before them: fiber's binder refuses the
		// body, gin's PostFormMap and PHP read them each their own way.
		{"amount=0&currency=usd&[", "/[", badBrackets},
		{"amount=1&currency=usd&extra[[]=x", "/extra[[]", badBrackets},
		{"amount=1&currency=usd&extra[a]]=x", "/extra[a]]", badBrackets},
		{"amount=1&currency=usd&a]b[c]=x", "/a]b[c]", badBrackets},
		{"amount=1&currency=usd&a]b=x", "/a]b", badBrackets},
		{"amount=1&currency=usd&[a]=x", "/[a]", badBrackets},
		{"amount=1&currency=usd&a[b]c=x", "/a[b]c", badBrackets},
		{"amount=1&currency=usd&metadata%5B%5B%5D=x", "/metadata[[]", badBrackets},
	} {
		_, err := decodeTree(tt.body)
		if at, reason := refusal(err); at != tt.at || reason != tt.reason {
			t.Errorf("%s:\n refused at %q: %q\n want %q: %q", tt.body, at, reason, tt.at, tt.reason)
		}
	}
}

// TestFormTreeSplit: how names become segments; malformed names are one literal segment.
func TestFormTreeSplit(t *testing.T) {
	for name, want := range map[string]string{
		"a":          "a",
		"a[b]":       "a|b",
		"a[b][0][c]": "a|b|0|c",
		"a[]":        "a|",
		"a[][]":      "a||",
		"a[b":        "a[b",
		"a[b]c":      "a[b]c",
		"a]b":        "a]b",
		"a]b[c]":     "a]b[c]",
		"a[b]]":      "a[b]]",
		"[a]":        "[a]",
		"a[b[c]]":    "a[b[c]]",
		"a[b c]":     "a|b c",
	} {
		if got := strings.Join(splitFormName(nil, name), "|"); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
	for _, tt := range []struct {
		x, y string
		want int
	}{{"", "0", -1}, {"2", "10", -1}, {"10", "a", -1}, {"01", "1", 1}, {"1", "01", -1}, {"1x", "2", 1}, {"b", "a", 1}} {
		if got := compareSegment(tt.x, tt.y); got != tt.want {
			t.Errorf("compareSegment(%q, %q) = %d, want %d", tt.x, tt.y, got, tt.want)
		}
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestFormTreeBody: a bracketed form is fingerprinted as its sorted fields, exactly as a flat
// form, leaving out the fields at or below the excluded paths (* is any index or key).
func TestFormTreeBody(t *testing.T) {
	sum := func(body string, tree bool, exclude ...string) canonical.Fingerprint {
		in := newInput("/x", body)
		in.Begin("op", "POST", "/x", nil, nil)
		if tree {
			var v treeCharge
			decodeTreeCharge(in.FormTree(), &v)
			in.FormTreeBody(exclude...)
		} else {
			in.FormBody(exclude...)
		}
		if err := in.Err(); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return in.Sum()
	}
	if sum(case025, true) != sum(case025, false) {
		t.Error("FormTreeBody differs from FormBody")
	}
	if sum(case025+"&k=1", true, "k") != sum(case025, false) {
		t.Error("excluded field counted")
	}
	base := "amount=1&currency=usd&items[0][price]=a&items[1][price]=b&metadata[a]=1"
	for _, tt := range []struct {
		body    string
		exclude []string
		same    bool
	}{
		{"items[1][price]=b&amount=1&metadata%5Ba%5D=1&currency=usd&items[0][price]=a", nil, true},
		{base + "&items[0][quantity]=2&items[1][quantity]=3", []string{"items[*][quantity]"}, true},
		{base + "&metadata[trace]=x", []string{"metadata[trace]"}, true},
		{base + "&shipping[name]=x&shipping[address][city]=y", []string{"shipping"}, true},
		{base + "&metadata[trace]=x", []string{"metadata[other]"}, false},
		{"amount=1&currency=usd&items[0][price]=b&items[1][price]=a&metadata[a]=1", nil, false},
		{base + "&expand[]=a&expand[]=b", []string{"expand[*]"}, true}, // every element, also unindexed
		{base + "&expand=a", []string{"expand[*]"}, false},             // the name alone is not below it
	} {
		if got := sum(tt.body, true, tt.exclude...) == sum(base, true); got != tt.same {
			t.Errorf("%s excluding %q: same fingerprint %v, want %v", tt.body, tt.exclude, got, tt.same)
		}
	}
}

// FuzzFormTree: any body decodes without panicking, and an accepted body decodes to the same
// value with the same fingerprint when its fields come in another order (fields of one name
// keep theirs: that order is the order of unindexed elements).
func FuzzFormTree(f *testing.F) {
	for _, seed := range []string{case025, "amount=1&currency=usd&expand[]=a&expand[]=b&metadata=", "a[b][c]=1&a[b][]=2&x[0]=1&x[1]=2",
		"amount=1&currency=usd&zeta[b][]=2&alpha=x&alpha=y&mid[k]=v", "amount=1&currency=usd&items[1][price]=b&items[0][price]=a"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fp := func(body string) (treeCharge, canonical.Fingerprint, error) {
			in := newInput("/x", body)
			in.Begin("op", "POST", "/x", nil, nil)
			var v treeCharge
			decodeTreeCharge(in.FormTree(), &v)
			in.FormTreeBody("metadata[trace]")
			if err := in.Err(); err != nil {
				in.Release()
				return v, canonical.Fingerprint{}, err
			}
			return v, in.Sum(), nil
		}
		v, sum, err := fp(body)
		if err != nil {
			return
		}
		// Reverse the fields, keeping the relative order of fields with the same name.
		fields := strings.Split(body, "&")
		names := make([]string, len(fields))
		for i, fl := range fields {
			in := newInput("/x", fl)
			in.Form()
			if len(in.fields) > 0 {
				names[i] = in.fields[0].Name
			}
		}
		var out []string
		done := map[string]bool{}
		for i := len(fields) - 1; i >= 0; i-- {
			if done[names[i]] {
				continue
			}
			done[names[i]] = true
			for j := range fields {
				if names[j] == names[i] {
					out = append(out, fields[j])
				}
			}
		}
		w, sum2, err := fp(strings.Join(out, "&"))
		if err != nil || sum2 != sum || js(v) != js(w) {
			t.Errorf("%q reordered as %q: %v, same fingerprint %v, same value %v", body, strings.Join(out, "&"), err, sum == sum2, js(v) == js(w))
		}
	})
}
