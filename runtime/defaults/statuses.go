package defaults

// Matches reports whether the rule speaks about status: its code, or every status of its class
// ("4xx" matches 400 to 499). A rule with neither a code nor a class matches nothing.
func (r StatusRule) Matches(status int) bool {
	if r.Code != 0 {
		return r.Code == status
	}
	return r.Class != 0 && status/100 == r.Class
}

// Final reports whether an answer with status is final under the replay.statuses rules: stored
// with the record and replayed to every retry of its key. The last rule that matches the status
// decides (["2xx", "!404", "4xx"] stores a 404: "4xx" comes last); a status no rule matches is
// not final, so it is never stored and releases the key, and the client's retry runs again. Nil
// rules are the default, Statuses(). This is the one statement of the rule: the runtime stores
// by it, `idemgen spec` declares the replay marker by it, `idemgen check` judges rule sets by
// it and `idemgen conform` expects replays by it.
func Final(rules []StatusRule, status int) bool {
	if rules == nil {
		rules = defaultStatuses[:]
	}
	final := false
	for _, r := range rules {
		if r.Matches(status) {
			final = !r.Exclude
		}
	}
	return final
}

// defaultStatuses is Statuses' table, for Final; it is never written.
var defaultStatuses = [...]StatusRule{
	{Class: 2}, {Class: 4},
	{Code: 408, Exclude: true}, {Code: 409, Exclude: true},
	{Code: 425, Exclude: true}, {Code: 429, Exclude: true},
}

// FinalIn reports which statuses of class (2 for 2xx) are final under rules, in order.
func FinalIn(rules []StatusRule, class int) []int {
	var out []int
	for s := class * 100; s < class*100+100; s++ {
		if Final(rules, s) {
			out = append(out, s)
		}
	}
	return out
}

// Shadowed is a rule of a replay.statuses list that decides nothing: a later rule matches every
// status it matches, so the rule's place, not its text, says what it means.
type Shadowed struct {
	// Rule is the index of the rule that decides nothing; By the index of the last later rule
	// that decides against it (-1 when the later rules only repeat it).
	Rule, By int
}

// ShadowedRules returns the rules of rules that change no status's Final: each is decided over
// by rules after it (["!404", "4xx"]: "!404" excludes nothing, "4xx" after it stores 404).
func ShadowedRules(rules []StatusRule) []Shadowed {
	var out []Shadowed
	for i, r := range rules {
		without := append(append([]StatusRule{}, rules[:i]...), rules[i+1:]...)
		changes := false
		for st := 100; st < 600 && !changes; st++ {
			changes = r.Matches(st) && Final(rules, st) != Final(without, st)
		}
		later, by := false, -1
		for j := i + 1; j < len(rules); j++ {
			if overlaps(r, rules[j]) {
				later = true
				if rules[j].Exclude != r.Exclude {
					by = j
				}
			}
		}
		if changes || !later {
			continue
		}
		out = append(out, Shadowed{Rule: i, By: by})
	}
	return out
}

// overlaps reports whether two rules match a status in common.
func overlaps(a, b StatusRule) bool {
	for st := 100; st < 600; st++ {
		if a.Matches(st) && b.Matches(st) {
			return true
		}
	}
	return false
}
