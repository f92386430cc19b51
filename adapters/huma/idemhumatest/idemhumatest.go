// Package idemhumatest keeps a code-first Huma service's OpenAPI document, which idemgen
// generates from, equal to its code: one test exports it under go generate and checks it
// everywhere else.
//
//	//go:generate go test -count=1 -run ^TestOpenAPI$ .
//	//go:generate go tool idemgen generate openapi.yaml --target middleware --out idem --package idem
//
//	func TestOpenAPI(t *testing.T) {
//		idemhumatest.Spec(t, newAPI(http.NewServeMux(), &Service{}), "openapi.yaml", idem.Routes())
//	}
package idemhumatest

import (
	"bytes"
	"os"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	"github.com/idemgen/idemgen/runtime"
)

// Spec checks the OpenAPI document api serves (3.1, YAML) against the file at path, and the
// operation table generated from it (routes) against api (idemhuma.Check). Run by go generate
// (which sets $GOFILE for the commands it runs), it writes the document to path instead and
// checks nothing else: idemgen generate, the next go:generate line, makes routes from it. A
// difference fails t with the command to run.
func Spec(t testing.TB, api huma.API, path string, routes []runtime.Route) {
	t.Helper()
	b, err := api.OpenAPI().YAML()
	if err != nil {
		t.Fatalf("the API's OpenAPI document: %v", err)
	}
	if os.Getenv("GOFILE") != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go generate", err)
	}
	if !bytes.Equal(old, b) {
		t.Fatalf("%s is not the OpenAPI document the API serves: run go generate", path)
	}
	if err := idemhuma.Check(api, routes); err != nil {
		t.Fatal(err)
	}
}
