package canonical

import "testing"

func TestUnsettable(t *testing.T) {
	m := func(b []byte, v map[string]string) []byte { return AppendMap(b, v, AppendString) }
	for _, tt := range []struct {
		u    *Unsettable[map[string]string]
		want string
	}{
		{nil, `{}`},
		{&Unsettable[map[string]string]{Unset: true}, `{"metadata":""}`},
		{&Unsettable[map[string]string]{Value: map[string]string{}}, `{"metadata":{}}`},
		{&Unsettable[map[string]string]{Value: map[string]string{"b": "", "a": "1"}}, `{"metadata":{"a":"1","b":""}}`},
	} {
		o, b := WriteObject(nil, nil)
		b = OptUnsettable(&o, b, `"metadata":`, tt.u, m)
		if got := string(o.End(b)); got != tt.want {
			t.Errorf("canonical %s, want %s", got, tt.want)
		}
	}
}

// TestFormValueFraming: a form body framed by its decoded value never shares a fingerprint with
// a JSON body of the same canonical text, nor with a flat form.
func TestFormValueFraming(t *testing.T) {
	sum := func(body func(f *Framer)) Fingerprint {
		var f Framer
		f.Begin("op", "POST", "/x")
		f.MediaType("application/x-www-form-urlencoded")
		body(&f)
		return f.Sum()
	}
	const v = `{"a":"1"}`
	formValue := sum(func(f *Framer) { f.BodyEnd(append(f.FormValueStart(), v...)) })
	jsonBody := sum(func(f *Framer) { f.BodyEnd(append(f.BodyStart(), v...)) })
	flat := sum(func(f *Framer) { _ = f.FormBody([]byte(v)) })
	if formValue == jsonBody || formValue == flat {
		t.Errorf("form value framing collides: %s %s %s", formValue, jsonBody, flat)
	}
	long := make([]byte, 300) // a length that needs two varint bytes
	for i := range long {
		long[i] = 'a'
	}
	a := sum(func(f *Framer) { f.BodyEnd(append(f.FormValueStart(), long...)) })
	b := sum(func(f *Framer) { f.BodyEnd(append(f.FormValueStart(), long[:299]...)) })
	if a == b {
		t.Error("long bodies collide")
	}
}
