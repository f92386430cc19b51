package canonical

import (
	"encoding/json"
	"testing"
)

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
		if tt.u == nil {
			continue
		}
		j, err := json.Marshal(tt.u)
		if want := tt.want[len(`{"metadata":`) : len(tt.want)-1]; err != nil || string(j) != want {
			t.Errorf("MarshalJSON %s (%v), want %s", j, err, want)
		}
		var back Unsettable[map[string]string]
		if err := json.Unmarshal(j, &back); err != nil || back.Unset != tt.u.Unset || len(back.Value) != len(tt.u.Value) {
			t.Errorf("UnmarshalJSON(%s) = %+v (%v)", j, back, err)
		}
	}
	// A string value: "" is always Unset.
	var s Unsettable[string]
	if err := json.Unmarshal([]byte(`""`), &s); err != nil || !s.Unset {
		t.Errorf(`"" decoded as %+v`, s)
	}
	if err := json.Unmarshal([]byte(`"x"`), &s); err != nil || s.Unset || s.Value != "x" {
		t.Errorf(`"x" decoded as %+v`, s)
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
