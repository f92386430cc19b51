package defaults

import "testing"

// TestStatusRuleString: a rule is written as replay.statuses writes it.
func TestStatusRuleString(t *testing.T) {
	for _, c := range []struct {
		r    StatusRule
		want string
	}{
		{StatusRule{Class: 2}, "2xx"},
		{StatusRule{Code: 402}, "402"},
		{StatusRule{Code: 409, Exclude: true}, "!409"},
		{StatusRule{Class: 5, Exclude: true}, "!5xx"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
