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
