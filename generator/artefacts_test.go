package generator

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestContractTakesTheRuntimesDefaults: the contract states runtime/defaults' facts, not copies
// of them: the statuses replay.statuses stores by default (defaults.Statuses), the problem
// table's statuses (defaults.Problems), every problem, and, for a document without operations,
// the default retention and body limit.
func TestContractTakesTheRuntimesDefaults(t *testing.T) {
	b, err := Contract(&model.Document{})
	if err != nil {
		t.Fatal(err)
	}
	contract := string(b)

	sentence := regexp.MustCompile("Final outcomes are stored and replayed:\\s+every ([^:]*?) except ([^.]*?)\\.").FindStringSubmatch(contract)
	if sentence == nil {
		t.Fatal("no sentence on the outcomes that are stored")
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var rules []defaults.StatusRule
	for i, part := range sentence[1:] {
		for _, m := range tick.FindAllStringSubmatch(part, -1) {
			r := defaults.StatusRule{Exclude: i == 1}
			if c, ok := strings.CutSuffix(m[1], "xx"); ok {
				r.Class, _ = strconv.Atoi(c)
			} else {
				r.Code, _ = strconv.Atoi(m[1])
			}
			rules = append(rules, r)
		}
	}
	if !slices.Equal(rules, defaults.Statuses()) {
		t.Errorf("the contract stores %v by default; defaults.Statuses() is %v", rules, defaults.Statuses())
	}

	rows := regexp.MustCompile("(?m)^\\| (\\d{3}) \\| `([a-z-]+)` \\|").FindAllStringSubmatch(contract, -1)
	got := map[string]int{}
	for _, r := range rows {
		got[r[2]], _ = strconv.Atoi(r[1])
	}
	for _, p := range defaults.Problems() {
		if got[p.Name] != p.Status {
			t.Errorf("the contract's problem table answers %s with %d; runtime/defaults with %d", p.Name, got[p.Name], p.Status)
		}
		delete(got, p.Name)
	}
	for name := range got {
		t.Errorf("the contract's problem table names %s, which runtime/defaults does not have", name)
	}

	if want := "(" + model.DurationText(defaults.Retention) + ")"; !strings.Contains(contract, "retention ends "+want) {
		t.Errorf("the contract of no operations does not give the default retention %s", want)
	}
	if want := "(" + fmtSize(defaults.BodyLimit) + ")"; !strings.Contains(contract, "larger than the limit "+want) {
		t.Errorf("the contract of no operations does not give the default body limit %s", want)
	}
}

// TestContractNamesOnlyTheRuntimesProblems: the template's {{status}} refuses a problem name
// runtime/defaults does not have.
func TestContractNamesOnlyTheRuntimesProblems(t *testing.T) {
	if _, err := problemStatus(defaults.Profile{}, "no-such-problem"); err == nil {
		t.Error("an unknown problem has a status")
	}
}

func TestStatusWords(t *testing.T) {
	for _, c := range []struct {
		rules []defaults.StatusRule
		want  string
	}{
		{[]defaults.StatusRule{{Class: 2}}, "every `2xx`"},
		{[]defaults.StatusRule{{Class: 2}, {Code: 402}, {Code: 409, Exclude: true}}, "every `2xx` and `402`"},
		{defaults.Statuses(), "every `2xx` and `4xx` except `408`, `409`, `425` and `429`"},
		{[]defaults.StatusRule{{Class: 2}, {Code: 404, Exclude: true}, {Class: 4}}, "every `2xx` and `4xx`"},
		{[]defaults.StatusRule{{Code: 404, Exclude: true}, {Class: 4}}, "every `4xx`"},
		{[]defaults.StatusRule{{Class: 2}, {Class: 2, Exclude: true}}, "no status"},
	} {
		if got := statusWords(c.rules); got != c.want {
			t.Errorf("%v: %q, want %q", c.rules, got, c.want)
		}
	}
}
