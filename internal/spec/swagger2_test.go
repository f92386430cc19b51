package spec

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/diag"
)

// TestSwagger2Located: every diagnostic of a Swagger 2.0 document, the loader's and the
// generator's, raised on the document kin-openapi converted to 3.0, is located in the 2.0 file
// the user wrote: a line and column, and a JSON pointer that names a place in that file at that
// line (operations, parameters whose index the conversion changed, the body parameter that
// became requestBody, a form field, a schema under definitions, settings inside x-idempotent).
func TestSwagger2Located(t *testing.T) {
	const path = "../../testdata/specs/swagger2/diagnostics.yaml"
	for _, cfg := range []string{"", "../../testdata/specs/swagger2/diagnostics.config.yaml"} {
		res := load(t, Options{Path: path, ConfigPath: cfg})
		generator.Diagnose(res.Doc, res.Diags)
		lc := newLocator(path)
		got := map[string]string{}
		for _, d := range res.Diags.Sorted() {
			if d.Loc.File != path && d.Loc.File != cfg {
				t.Errorf("%s: in another file", d)
				continue
			}
			if d.Loc.Line == 0 || d.Loc.Column == 0 || d.Loc.Pointer == "" {
				t.Errorf("unlocated: %s", d)
				continue
			}
			got[d.Code] = d.Loc.Pointer
			if d.Loc.File != path {
				continue
			}
			key, val := lc.lookup(path, d.Loc.Pointer)
			line := 0
			switch {
			case key != nil:
				line = key.Line
			case val != nil:
				line = val.Line
			}
			if line == 0 {
				t.Errorf("%s: the pointer names nothing in the 2.0 file", d)
			} else if line != d.Loc.Line && !strings.Contains(d.Loc.Pointer, "x-idempotent") {
				t.Errorf("%s: the pointer is on line %d", d, line)
			}
		}
		want := map[string]string{
			"exclude-matches-nothing":   "/paths/~1payments/post/x-idempotent/fingerprint/exclude/0",
			"key-length-capped":         "/paths/~1payments/post/parameters/0",
			"possible-idempotency-key":  "/paths/~1payments~1{id}~1capture/post",
			"duplicate-operation-id":    "/paths/~1payments~1{id}~1capture/post/operationId",
			"unmarked-idempotency-key":  "/paths/~1refunds/post",
			"described-idempotency-key": "/paths/~1transfers/post/parameters/1",
		}
		if cfg != "" {
			// createRefund and createTransfer are marked: their bodies are checked.
			want = map[string]string{
				"exclude-matches-nothing":  want["exclude-matches-nothing"],
				"key-length-capped":        want["key-length-capped"],
				"possible-idempotency-key": want["possible-idempotency-key"],
				"duplicate-operation-id":   want["duplicate-operation-id"],
				"bad-bounds":               "/paths/~1refunds/post/parameters/2/schema/properties/amount/minimum",
			}
		}
		for code, ptr := range want {
			if got[code] != ptr {
				t.Errorf("config %q: %s at %q, want %q", cfg, code, got[code], ptr)
			}
		}
		if len(got) != len(want) {
			t.Errorf("config %q: codes %v, want %v", cfg, got, want)
		}
	}
	_ = diag.Error
}
