package conformance

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sharedCases is the workspace's shared case folder (../shared/cases beside the repository),
// and sharedFormCases the folder of the form cases kept apart from them (cases-forms).
// testdata/cases is a verbatim copy of both; they exist only in the workspace, not in a clone.
const (
	sharedCases     = "../../../../shared/cases"
	sharedFormCases = "../../../../shared/cases-forms"
)

// TestCasesCopyIsVerbatim fails when the project's copy of the shared cases has drifted from
// them (a case added, changed or removed there), so that TestCases never passes on an old copy.
// Outside the workspace there is nothing to compare with and it skips.
func TestCasesCopyIsVerbatim(t *testing.T) {
	shared, err := filepath.Glob(filepath.Join(sharedCases, "[0-9]*.yaml"))
	if err != nil || len(shared) == 0 {
		t.Skipf("no shared cases at %s (only in the idemgen workspace)", sharedCases)
	}
	forms, err := filepath.Glob(filepath.Join(sharedFormCases, "[0-9]*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shared = append(append(shared, forms...), filepath.Join(sharedCases, "README.md"))
	copied, err := filepath.Glob("../../../testdata/cases/[0-9]*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, p := range shared {
		name := filepath.Base(p)
		want[name] = true
		a, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("../../../testdata/cases", name))
		if err != nil {
			t.Errorf("testdata/cases lacks %s: copy it from %s", name, filepath.Dir(p))
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("testdata/cases/%s differs from %s: copy it again", name, p)
		}
	}
	for _, p := range copied {
		if !want[filepath.Base(p)] {
			t.Errorf("testdata/cases/%s is not a shared case", filepath.Base(p))
		}
	}
}
