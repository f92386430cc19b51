package generator

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

func TestParseDB(t *testing.T) {
	for _, tt := range []struct {
		ref, code, err string
	}{
		{ref: DefaultDB, code: "pgstore.DBTX"},
		{ref: "*github.com/idemgen/idemgen/runtime/store/memstore.DB", code: "*memstore.DB"},
		{ref: "*database/sql.Tx", code: "*sql.Tx"},
		{ref: "example.com/db/v2.Querier", code: "v2.Querier"},
		{ref: "DBTX", err: "not a Go type named by its import path"},
		{ref: "github.com/x/store.", err: "not a Go type named by its import path"},
		{ref: "github.com/x/store/", err: "not a Go type named by its import path"},
		{ref: "github.com/x/store.dbtx", err: `"dbtx" is not an exported Go type name`},
		{ref: "github.com/x/store.DB[int]", err: "not an exported Go type name"},
		{ref: "**github.com/x/store.DB", err: "is not an import path"},
		{ref: "/abs/store.DB", err: "is not an import path"},
	} {
		h, err := parseDB(tt.ref)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseDB(%q): err %v, want %q", tt.ref, err, tt.err)
			}
		case err != nil:
			t.Errorf("parseDB(%q): %v", tt.ref, err)
		default:
			if got := render1(h.code()); got != tt.code {
				t.Errorf("parseDB(%q) renders %s, want %s", tt.ref, got, tt.code)
			}
		}
	}
}

// TestPlanDB: Options.DB wins over the config's db; a bad db in the config is located there and
// the rest of the plan is still checked.
func TestPlanDB(t *testing.T) {
	loc := diag.Loc{File: "idemgen.yaml", Line: 2, Column: 5, Pointer: "/db"}
	doc := &model.Document{DB: "*example.com/shop/store.DB", DBLoc: loc}
	p, err := newPlan(doc, Options{Package: "api"})
	if err != nil || render1(p.db.code()) != "*store.DB" {
		t.Fatalf("the config's db: %v %v", p, err)
	}
	p, err = newPlan(doc, Options{Package: "api", DB: DefaultDB})
	if err != nil || !p.db.pgstore() {
		t.Fatalf("Options.DB over the config's: %v %v", p, err)
	}
	if _, err := newPlan(&model.Document{}, Options{Package: "api", DB: "store"}); err == nil || !strings.Contains(err.Error(), "generate: db") {
		t.Errorf("a bad Options.DB: %v", err)
	}
	var d diag.List
	Diagnose(&model.Document{DB: "example.com/shop.db", DBLoc: loc}, &d)
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), `idemgen.yaml:2:5: error[config-invalid]: db "example.com/shop.db"`) {
		t.Errorf("a bad db in the config: %v", err)
	}
}
