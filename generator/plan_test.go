package generator

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
)

// TestEmitOrder: every decision is in the plan and emitters only read it, so the Go files are the
// same whatever the order they are emitted in, and whether they come from one plan or each from
// a plan of its own. (A name an emitter decided would depend on which file was emitted first.)
func TestEmitOrder(t *testing.T) {
	for _, c := range goldenCases(t) {
		doc, opts, errText := loadCase(t, c)
		if errText != "" {
			continue
		}
		want, err := Generate(doc, opts)
		if err != nil {
			continue // error.txt: nothing is emitted
		}
		t.Run(c.name, func(t *testing.T) {
			p, err := newPlan(doc, opts)
			if err != nil {
				t.Fatal(err)
			}
			files := p.goFiles()
			rng := rand.New(rand.NewPCG(uint64(len(c.name)), 26))
			for run := 0; run < 4; run++ {
				order := append([]goFile(nil), files...)
				if run == 0 {
					for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
						order[i], order[j] = order[j], order[i]
					}
				} else {
					rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				}
				var names []string
				for _, f := range order {
					names = append(names, f.name)
					got, err := p.render(f)
					if err != nil {
						t.Fatal(err)
					}
					if string(got) != string(want[f.name]) {
						t.Errorf("%s differs when the files are emitted in the order %s", f.name, strings.Join(names, ", "))
					}
				}
			}
			for _, f := range files {
				alone, err := newPlan(doc, opts)
				if err != nil {
					t.Fatal(err)
				}
				got, err := alone.render(f)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want[f.name]) {
					t.Errorf("%s differs when it is the only file emitted from its plan", f.name)
				}
			}
		})
	}
}

// TestDiagnoseFindsEveryError: Diagnose only plans, so planning must find every error Generate
// reports; every error case of the corpus gets the same errors from both.
func TestDiagnoseFindsEveryError(t *testing.T) {
	refused := 0
	for _, c := range goldenCases(t) {
		doc, opts, errText := loadCase(t, c)
		if errText != "" {
			continue
		}
		_, genErr := Generate(doc, opts)
		var d diag.List
		Diagnose(doc, &d)
		var de *diag.Errors
		if genErr != nil && !errors.As(genErr, &de) {
			t.Errorf("%s: Generate: %v", c.name, genErr)
			continue
		}
		if genErr != nil {
			refused++
		}
		if got, want := diagText(d.Err()), diagText(genErr); got != want {
			t.Errorf("%s: Diagnose reports\n%s\nGenerate\n%s", c.name, got, want)
		}
	}
	if refused == 0 {
		t.Error("no case of the corpus is refused by the generator alone: nothing was compared")
	}
}
