package main

import (
	"os"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOgenSpecIsTheConformanceSpec: ogen-spec.yaml, which ogen generates the server from, is the
// conformance spec without exactly the bracketed form fields of POST /v1/charges that ogen
// v1.24.0 refuses, so the two never drift apart.
func TestOgenSpecIsTheConformanceSpec(t *testing.T) {
	load := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	full := load("../../testdata/specs/conformance.yaml")
	form := dig(t, full, "paths", "/v1/charges", "post", "requestBody", "content", "application/x-www-form-urlencoded")
	props := dig(t, form, "schema", "properties")
	for _, name := range []string{"metadata", "items", "shipping"} {
		if _, ok := props[name]; !ok {
			t.Fatalf("the conformance spec has no %s on POST /v1/charges: update ogen-spec.yaml and this test", name)
		}
		delete(props, name)
	}
	delete(form, "encoding")
	if ogen := load("ogen-spec.yaml"); !reflect.DeepEqual(full, ogen) {
		t.Error("ogen-spec.yaml is not testdata/specs/conformance.yaml without the bracketed fields of POST /v1/charges: copy it again and remove them")
	}
}

func dig(t *testing.T, v map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := v[k].(map[string]any)
		if !ok {
			t.Fatalf("no %s in the conformance spec", k)
		}
		v = next
	}
	return v
}
