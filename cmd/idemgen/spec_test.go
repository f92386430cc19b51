package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpecCommand: idemgen spec writes the annotated spec (to --out, or standard output), whose
// operations idemgen list finds without the flags that marked them; a spec with errors writes
// nothing and exits 1.
func TestSpecCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "treasury.idempotent.json")
	const r3 = "../../testdata/specs/round3/"
	code, _, errOut := idemgen(t, "spec", r3+"treasury.yaml", "--config", r3+"treasury.unsafe.yaml", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(b), "{") || !strings.Contains(string(b), `"x-fern-idempotent": true`) {
		t.Fatalf("--out %s (json from its extension): %v\n%.300s", out, err, b)
	}
	_, want, _ := idemgen(t, "list", r3+"treasury.yaml", "--config", r3+"treasury.unsafe.yaml")
	code, got, errOut := idemgen(t, "list", out)
	if code != exitOK || got != want {
		t.Errorf("list of the annotated spec (exit %d, %s):\n%s\nwant\n%s", code, errOut, got, want)
	}
	code, yml, _ := idemgen(t, "spec", "../../testdata/specs/petstore.yaml")
	if code != exitOK || !strings.Contains(yml, "\nopenapi: 3.0.3\n") || !strings.Contains(yml, "Idempotent-Replayed:") {
		t.Errorf("yaml on standard output (exit %d):\n%.400s", code, yml)
	}
	if code, yml, errOut = idemgen(t, "spec", r3+"duplicate-ids.yaml"); code != exitSpec || yml != "" || !strings.Contains(errOut, "duplicate-operation-id") {
		t.Errorf("a spec with errors: exit %d, wrote %q, stderr %s", code, yml, errOut)
	}
	if code, _, _ = idemgen(t, "spec", r3+"treasury.yaml", "--format", "xml"); code != exitUsage {
		t.Errorf("--format xml: exit %d", code)
	}
}
