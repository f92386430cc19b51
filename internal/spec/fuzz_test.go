package spec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: whatever the document, Load returns (never panics), and a document it cannot build
// comes with at least one located error.
func FuzzLoad(f *testing.F) {
	f.Add(fmt.Sprintf(baseSpec, "true", "false", "{}", "true"))
	f.Add(fmt.Sprintf(baseSpec, `{key: {body: /data/attributes/idempotencyKey}, fingerprint: {exclude: ["/lines/*/note"]}}`, "true", "{mode: lease}", `"x"`))
	f.Add(graphSpec)
	for _, p := range []string{"dangling-ref.yaml", "wrong-kind.yaml", "invalid.yaml", "remote-ref.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../testdata/specs/broken", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(`swagger: "2.0"
info: {title: t, version: "1"}
paths: {/a: {post: {x-idempotent: true, parameters: [{name: b, in: body, schema: {type: object}}], responses: {"200": {description: ok}}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		p := filepath.Join(t.TempDir(), "openapi.yaml")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Load(context.Background(), Options{Path: p, Infer: true})
		if err != nil {
			t.Fatalf("Load returned an error for a readable file: %v", err)
		}
		if res.Doc == nil && !res.Diags.HasErrors() {
			t.Fatal("no document and no error")
		}
		for _, d := range res.Diags.Sorted() {
			if d.Loc.File == "" || d.Code == "" || d.Code == "internal-error" {
				t.Fatalf("bad diagnostic %s", d)
			}
		}
	})
}
