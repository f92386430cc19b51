package faults

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Row is one business effect committed by the service: a payments row (atomic mode) or a charges
// row (lease mode), with the attempt that wrote it.
type Row struct {
	Key     string // tenant/key, as Attempt.Key
	ID      int64
	Attempt string
	Amount  int64
}

// Call is one call the fake payment provider received.
type Call struct {
	Key         string // tenant/key of the idempotent request that made it
	ProviderKey string
	Attempt     string
	Amount      int64
	// Outcome is "charged" (a new charge), "deduplicated" (the key was charged before with the
	// same parameters) or "refused" (the key was charged before with other parameters).
	Outcome string
}

// Effects are the ground truth after a run.
type Effects struct {
	Rows  []Row
	Calls []Call
}

// AuditOptions say what a scenario allows.
type AuditOptions struct {
	// Allowed are the kinds of answer the scenario may produce; nil allows every kind but
	// KindOther and KindFailed.
	Allowed []Kind
	// Settled: every logical request was retried until it had a definitive answer, so every
	// execution must have been seen by a client (no lost response) and every logical request
	// must have its answer.
	Settled bool
}

// Audit checks a history against the effects and returns every problem it finds:
//
//   - at most one execution per key (rows), and one real provider charge per provider key,
//     never a provider key reused with other parameters;
//   - every success names the execution of its own attempt, every replay that key's execution;
//   - executions == confirmed effects: a key has a row if and only if a client got a success or
//     a replay for it (when settled: no lost response, no unconfirmed execution);
//   - a 503 that says "not processed" was not processed: its attempt wrote no row and called no
//     provider;
//   - answers are of the allowed kinds.
func Audit(attempts []Attempt, eff Effects, opts AuditOptions) []string {
	var problems []string
	add := func(f string, args ...any) { problems = append(problems, fmt.Sprintf(f, args...)) }

	rows := map[string][]Row{}
	byAttempt := map[string]Row{}
	for _, r := range eff.Rows {
		rows[r.Key] = append(rows[r.Key], r)
		byAttempt[r.Attempt] = r
	}
	for k, rs := range rows {
		if len(rs) > 1 {
			var who []string
			for _, r := range rs {
				who = append(who, fmt.Sprintf("row %d by %s amount %d", r.ID, r.Attempt, r.Amount))
			}
			add("key %s executed %d times: %s", k, len(rs), strings.Join(who, "; "))
		}
	}
	called := map[string]bool{}
	charged := map[string][]Call{}
	for _, c := range eff.Calls {
		called[c.Attempt] = true
		switch c.Outcome {
		case "charged":
			charged[c.ProviderKey] = append(charged[c.ProviderKey], c)
		case "refused":
			add("provider key of %s reused with other parameters by %s (amount %d): one key, two different requests (issue 16 item 1)", c.Key, c.Attempt, c.Amount)
		}
	}
	chargedKeys := map[string]bool{}
	for pk, cs := range charged {
		chargedKeys[cs[0].Key] = true
		if len(cs) > 1 {
			add("provider charged %d times under one provider key (%s)", len(cs), pk)
		}
	}

	allowed := map[Kind]bool{}
	if opts.Allowed == nil {
		for k := KindOK; k < KindFailed; k++ {
			allowed[k] = true
		}
	}
	for _, k := range opts.Allowed {
		allowed[k] = true
	}
	confirmed := map[string]bool{}
	definitive := map[int]bool{}
	logicals := map[int]string{}
	for i := range attempts {
		a := &attempts[i]
		logicals[a.Logical] = a.Key
		if a.Kind.Definitive() {
			definitive[a.Logical] = true
		}
		if !allowed[a.Kind] {
			add("%s (%s %s on %s) answered %d %s, which this scenario never allows: %s", a.ID, a.Mode, a.Body, a.Replica, a.Status, a.Kind, a.Detail)
		}
		switch a.Kind {
		case KindOK, KindReplay:
			confirmed[a.Key] = true
			rs := rows[a.Key]
			if len(rs) == 0 {
				add("%s got %s naming execution %d by %s, but key %s has no committed row (lost execution)", a.ID, a.Kind, a.ExecID, a.ExecAttempt, a.Key)
				continue
			}
			if a.ExecID != rs[0].ID || a.ExecAttempt != rs[0].Attempt {
				add("%s got %s naming execution %d by %s; the key's execution is %d by %s", a.ID, a.Kind, a.ExecID, a.ExecAttempt, rs[0].ID, rs[0].Attempt)
			}
			if a.Kind == KindOK && a.ExecAttempt != a.ID {
				add("%s got a first response (not a replay) for the execution of %s", a.ID, a.ExecAttempt)
			}
		case KindUnavailable:
			if r, ok := byAttempt[a.ID]; ok {
				add("%s got 503 %q, yet its execution (row %d) committed (issue 16 item 2)", a.ID, a.Detail, r.ID)
			}
			if called[a.ID] && a.Mode == "lease" {
				add("%s got 503 %q, yet it called the payment provider", a.ID, a.Detail)
			}
		}
	}
	for k, rs := range rows {
		if !confirmed[k] && opts.Settled {
			add("key %s executed (row %d by %s) but no client ever got that response (lost response)", k, rs[0].ID, rs[0].Attempt)
		}
	}
	if opts.Settled {
		for l, k := range logicals {
			if !definitive[l] {
				add("logical request %d on key %s never got a definitive answer", l, k)
			}
		}
		for k := range chargedKeys {
			if len(rows[k]) == 0 {
				add("provider charged for key %s, but no execution completed (an effect outside the database without a record)", k)
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// Figures summarise a run.
type Figures struct {
	Name       string
	Attempts   int
	Logical    int
	Keys       int
	ByKind     map[Kind]int
	ByStatus   map[int]int
	Executions int
	// ProviderCalls counts calls by outcome.
	ProviderCalls map[string]int
	Elapsed       time.Duration
	// Latency percentiles of all attempts.
	P50, P99, Max time.Duration
	// Extra are scenario-specific figures, printed as given.
	Extra []string
}

// Summarize computes the figures of a run.
func Summarize(name string, attempts []Attempt, eff Effects, elapsed time.Duration) Figures {
	f := Figures{Name: name, Attempts: len(attempts), ByKind: map[Kind]int{}, ByStatus: map[int]int{},
		Executions: len(eff.Rows), ProviderCalls: map[string]int{}, Elapsed: elapsed}
	logical, keys := map[int]bool{}, map[string]bool{}
	lat := make([]time.Duration, 0, len(attempts))
	for _, a := range attempts {
		logical[a.Logical], keys[a.Key] = true, true
		f.ByKind[a.Kind]++
		f.ByStatus[a.Status]++
		lat = append(lat, a.Return-a.Call)
	}
	f.Logical, f.Keys = len(logical), len(keys)
	for _, c := range eff.Calls {
		f.ProviderCalls[c.Outcome]++
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		f.P50, f.P99, f.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return f
}

func (f Figures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d attempts, %d logical requests, %d keys, %d executions in %v",
		f.Name, f.Attempts, f.Logical, f.Keys, f.Executions, f.Elapsed.Round(time.Millisecond))
	var kinds []string
	for k := KindOK; k <= KindOther; k++ {
		if n := f.ByKind[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(&b, "\n  answers: %s", strings.Join(kinds, ", "))
	var statuses []int
	for s := range f.ByStatus {
		statuses = append(statuses, s)
	}
	sort.Ints(statuses)
	var ss []string
	for _, s := range statuses {
		name := fmt.Sprint(s)
		if s == 0 {
			name = "no answer"
		}
		ss = append(ss, fmt.Sprintf("%s×%d", name, f.ByStatus[s]))
	}
	fmt.Fprintf(&b, "\n  by status: %s", strings.Join(ss, " "))
	if len(f.ProviderCalls) > 0 {
		fmt.Fprintf(&b, "\n  provider calls: charged %d, deduplicated %d, refused %d",
			f.ProviderCalls["charged"], f.ProviderCalls["deduplicated"], f.ProviderCalls["refused"])
	}
	fmt.Fprintf(&b, "\n  latency: p50 %v, p99 %v, max %v", f.P50.Round(time.Millisecond), f.P99.Round(time.Millisecond), f.Max.Round(time.Millisecond))
	for _, e := range f.Extra {
		b.WriteString("\n  " + e)
	}
	return b.String()
}
