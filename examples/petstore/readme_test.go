package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGoCompiles compiles the Go blocks of the README's "Five minutes" walk-through (the
// handler, the scope function, the wiring) against this example's generated package, with a
// stub for what the README leaves to the reader (the store type and its other handlers), so a
// snippet that calls something the library does not have fails here.
func TestReadmeGoCompiles(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```go\n(.*?)\n```").FindAllStringSubmatch(string(readme), -1) {
		if strings.HasPrefix(m[1], "//go:generate") {
			continue // a directive, not code
		}
		if strings.HasPrefix(m[1], "func ") || strings.HasPrefix(m[1], "// ") {
			blocks = append(blocks, m[1])
		}
	}
	src := strings.Join(blocks, "\n\n")
	for _, want := range []string{"func (s *store) placeOrder(", "func apiKeyScope(", "api.Register("} {
		if !strings.Contains(src, want) {
			t.Fatalf("the README's Go blocks have no %q: did the walk-through change?", want)
		}
	}
	// Inside the module, so that it imports this checkout's packages; go vet type-checks it.
	dir, err := os.MkdirTemp("../..", "_idemgen-readme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := `package readme

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/petstore/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// What the README leaves to the reader; an import the blocks stop using is still used.
type store struct{}

func (s *store) addPet(context.Context, pgstore.DBTX, api.AddPetParams, api.AddPetBody) (runtime.Response, error) {
	return runtime.Response{}, nil
}
func (s *store) getPet(http.ResponseWriter, *http.Request) {}

var (
	_ = context.Background
	_ = errors.New
	_ = os.Getenv
	_ = pgxpool.New
)

` + src + "\n"
	if err := os.WriteFile(filepath.Join(dir, "readme.go"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go blocks do not compile: %v\n%s\n--- the file:\n%s", err, out, file)
	}
}
