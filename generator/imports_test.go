package generator

import (
	"go/format"
	"testing"
)

func TestGroupImports(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"both kinds",
			"package p\n\nimport (\n\t\"context\"\n\tcanonical \"github.com/idemgen/idemgen/runtime/canonical\"\n\t\"github.com/idemgen/idemgen/runtime/gen\"\n\t\"net/http\"\n)\n\nvar _ = 1\n",
			"package p\n\nimport (\n\t\"context\"\n\t\"net/http\"\n\n\tcanonical \"github.com/idemgen/idemgen/runtime/canonical\"\n\t\"github.com/idemgen/idemgen/runtime/gen\"\n)\n\nvar _ = 1\n"},
		{"standard library only",
			"package p\n\nimport (\n\t\"context\"\n\t\"net/http\"\n)\n",
			"package p\n\nimport (\n\t\"context\"\n\t\"net/http\"\n)\n"},
		{"others only",
			"package p\n\nimport (\n\t\"example.com/a\"\n\t\"github.com/b/c\"\n)\n",
			"package p\n\nimport (\n\t\"example.com/a\"\n\t\"github.com/b/c\"\n)\n"},
		{"one import", "package p\n\nimport \"fmt\"\n", "package p\n\nimport \"fmt\"\n"},
		{"no imports", "package p\n", "package p\n"},
	} {
		got := string(groupImports([]byte(tt.in)))
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
			continue
		}
		if f, err := format.Source([]byte(got)); err != nil || string(f) != got {
			t.Errorf("%s: not a fixed point of gofmt (%v):\n%s", tt.name, err, f)
		}
	}
}
