package gen

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// nestedParts reads a multipart body with nested names and returns, per part, its name and its
// data (the assembled JSON of a nested member), or the error.
func nestedParts(t *testing.T, names []string, parts ...mpart) ([]string, error) {
	t.Helper()
	m := mpInput(mpType, mpBody(t, parts...)).Multipart(1<<20, names...)
	var got []string
	for m.Next() {
		p := &m.parts[m.mpNext-1]
		got = append(got, p.name+"="+string(p.data))
	}
	return got, (*Input)(m).Err()
}

// TestNestedPartsGrouped: the parts of a nested member, bracketed or dotted, become one part
// under the member's name, in place of the first, holding their values as JSON strings; other
// parts are left as they are.
func TestNestedPartsGrouped(t *testing.T) {
	names := []string{"metadata", "accounting", "line_items", "tags"}
	got, err := nestedParts(t, names,
		mpart{name: "amount", data: "100"},
		mpart{name: "metadata[order]", data: "42"},
		mpart{name: "accounting.account_id", data: "acc_1"},
		mpart{name: "metadata[note]", data: "a \"quoted\" note"},
		mpart{name: "line_items[1][amount]", data: "5"},
		mpart{name: "line_items[0][amount]", data: "7"},
		mpart{name: "line_items[0][description]", data: "first"},
		mpart{name: "accounting.class_id", data: "cls_1"},
		mpart{name: "tags[]", data: "b"},
		mpart{name: "tags[]", data: "a"},
		mpart{name: "other[x]", data: "kept"},
		mpart{name: "document", filename: "a.pdf", ctype: "application/pdf", data: "%PDF"},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"amount=100",
		`metadata={"order":"42","note":"a \"quoted\" note"}`,
		`accounting={"account_id":"acc_1","class_id":"cls_1"}`,
		`line_items=[{"amount":"7","description":"first"},{"amount":"5"}]`,
		`tags=["b","a"]`,
		"other[x]=kept",
		"document=%PDF",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without nested names (the code generated before nested parts existed) nothing is grouped.
	got, err = nestedParts(t, nil, mpart{name: "metadata[order]", data: "42"})
	if err != nil || len(got) != 1 || got[0] != "metadata[order]=42" {
		t.Errorf("without names: %q, %v", got, err)
	}
	// Indices with a gap make an object; a literal name that is not base[seg] is left alone.
	got, err = nestedParts(t, names, mpart{name: "line_items[0]", data: "a"}, mpart{name: "line_items[2]", data: "b"}, mpart{name: "metadata[x", data: "c"})
	if err != nil || strings.Join(got, " ") != `line_items={"0":"a","2":"b"} metadata[x=c` {
		t.Errorf("gap: %q, %v", got, err)
	}
}

// TestNestedPartsRefused: what cannot be one value is a 400 naming the part.
func TestNestedPartsRefused(t *testing.T) {
	names := []string{"metadata", "tags"}
	cases := []struct {
		parts       []mpart
		pointer, in string
	}{
		{[]mpart{{name: "metadata[k]", data: "1"}, {name: "metadata.k", data: "2"}}, "/metadata.k", `part "metadata.k" given more than once`},
		{[]mpart{{name: "metadata[k]", data: "1"}, {name: "metadata[k][x]", data: "2"}}, "/metadata[k][x]", "below a field that has a value"},
		{[]mpart{{name: "metadata[k][x]", data: "1"}, {name: "metadata[k]", data: "2"}}, "/metadata[k]", "where other parts have nested fields"},
		{[]mpart{{name: "tags[0]", data: "1"}, {name: "tags[]", data: "2"}}, "/tags[]", "appends ([])"},
		{[]mpart{{name: "tags[]", data: "1"}, {name: "tags[0]", data: "2"}}, "/tags[0]", "written with []"},
		{[]mpart{{name: "metadata[k]", data: "\xff"}}, "/metadata[k]", "not UTF-8"},
		{[]mpart{{name: "tags[0][x]", data: "1"}, {name: "tags[][x]", data: "2"}}, "/tags[][x]", "appends ([])"},
	}
	for _, c := range cases {
		_, err := nestedParts(t, names, c.parts...)
		var ce *canonical.Error
		if !errors.As(err, &ce) || ce.Pointer != c.pointer || !strings.Contains(ce.Reason, c.in) {
			t.Errorf("%v: %v, want %s: …%s…", c.parts, err, c.pointer, c.in)
		}
	}
	// A part named after the member beside its nested parts is the member given twice, which
	// the generated decoder refuses (Multipart.JSON: "part given more than once").
	m := mpInput(mpType, mpBody(t, mpart{name: "metadata", ctype: "application/json", data: `{"k":"1"}`}, mpart{name: "metadata[k]", data: "1"})).Multipart(1<<20, names...)
	var seen uint64
	for m.Next() {
		m.JSON(&seen, 0).Skip()
	}
	m.End()
	if err := (*Input)(m).Err(); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("JSON part and nested parts: %v", err)
	}
}

// TestNestedPartsDecoded: the member's JSON decoder reads the assembled value with numbers and
// booleans as text, and reports its errors under the member's pointer without a byte offset.
func TestNestedPartsDecoded(t *testing.T) {
	read := func(parts ...mpart) (int64, bool, error) {
		m := mpInput(mpType, mpBody(t, parts...)).Multipart(1<<20, "limits")
		var seen uint64
		var n int64
		var b bool
		for m.Next() {
			d := m.JSON(&seen, 0)
			for d.BeginObject(); d.NextMember(); {
				switch d.Key() {
				case "count":
					n = d.Int64()
				case "on":
					b = d.Bool()
				default:
					d.Reject()
				}
			}
			d.EndObject()
		}
		m.End()
		return n, b, (*Input)(m).Err()
	}
	if n, b, err := read(mpart{name: "limits[count]", data: "12"}, mpart{name: "limits.on", data: "true"}); err != nil || n != 12 || !b {
		t.Errorf("decoded %d %v, %v", n, b, err)
	}
	_, _, err := read(mpart{name: "limits[count]", data: "twelve"})
	var ce *canonical.Error
	if !errors.As(err, &ce) || ce.Pointer != "/limits/count" || ce.Offset != -1 || !strings.Contains(ce.Reason, `in the nested parts of "limits": expected a number, found the text "twelve"`) {
		t.Errorf("bad number: %#v", err)
	}
	if _, _, err := read(mpart{name: "limits[extra]", data: "1"}); !errors.As(err, &ce) || ce.Pointer != "/limits/extra" {
		t.Errorf("undeclared nested field: %v", err)
	}
	// A JSON part of the member keeps JSON's rules: a number as a string is still refused.
	if _, _, err := read(mpart{name: "limits", ctype: "application/json", data: `{"count":"12"}`}); err == nil {
		t.Error("a JSON part took a number written as a string")
	}
}

// TestNestedFiles: files inside an array of objects, as SDKs send them: empty brackets in body
// order (documents[][file], Stainless; a new element when the last one already has the field,
// Rack's rule) or explicit indices (documents[0][file]). Both assemble one value, each file as
// {"$file": …} that FileValue reads back whole, so both spellings are one request.
func TestNestedFiles(t *testing.T) {
	names := []string{"documents"}
	pdf := func(name, n string) mpart {
		return mpart{name: name, filename: "doc" + n + ".pdf", ctype: "application/pdf", data: "%PDF-" + n}
	}
	stainless, err := nestedParts(t, names,
		mpart{name: "amount", data: "10"},
		mpart{name: "documents[][document_type]", data: "invoice"},
		pdf("documents[][file]", "1"),
		pdf("documents[][file]", "2"),
		mpart{name: "documents[][document_type]", data: "receipt"},
	)
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := nestedParts(t, names,
		mpart{name: "amount", data: "10"},
		pdf("documents[0][file]", "1"),
		mpart{name: "documents[0][document_type]", data: "invoice"},
		mpart{name: "documents[1][document_type]", data: "receipt"},
		pdf("documents[1][file]", "2"),
	)
	if err != nil {
		t.Fatal(err)
	}
	file := func(n string) string {
		return `{"$file":{"content_type":"application/pdf","data":"` + base64.StdEncoding.EncodeToString([]byte("%PDF-"+n)) + `","filename":"doc` + n + `.pdf"}}`
	}
	// Member order inside an element follows the parts; the canonical form sorts it.
	wantS := `documents=[{"document_type":"invoice","file":` + file("1") + `},{"file":` + file("2") + `,"document_type":"receipt"}]`
	wantI := `documents=[{"file":` + file("1") + `,"document_type":"invoice"},{"document_type":"receipt","file":` + file("2") + `}]`
	if len(stainless) != 2 || stainless[1] != wantS {
		t.Errorf("empty brackets:\n%s\nwant\n%s", strings.Join(stainless, "\n"), wantS)
	}
	if len(indexed) != 2 || indexed[1] != wantI {
		t.Errorf("indices:\n%s\nwant\n%s", strings.Join(indexed, "\n"), wantI)
	}
	cs, _ := canonical.AppendCanonical(nil, []byte(strings.TrimPrefix(wantS, "documents=")))
	ci, _ := canonical.AppendCanonical(nil, []byte(strings.TrimPrefix(wantI, "documents=")))
	if string(cs) != string(ci) {
		t.Errorf("the two spellings are two values:\n%s\n%s", cs, ci)
	}

	// FileValue reads the file back; a JSON value where a file belongs is refused.
	var d canonical.Decoder
	d.Reset([]byte(file("1")))
	if f := FileValue(&d); d.Finish() != nil || f.Filename != "doc1.pdf" || f.ContentType != "application/pdf" || string(f.Data) != "%PDF-1" {
		t.Errorf("FileValue: %+v, %v", f, d.Err())
	}
	for _, bad := range []string{`"%PDF-1"`, `{"data":"x"}`} {
		d.Reset([]byte(bad))
		FileValue(&d)
		if err := d.Finish(); err == nil {
			t.Errorf("FileValue(%s) accepted", bad)
		}
	}
}
