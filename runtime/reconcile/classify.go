package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// Class is a kind of desynchronisation between the provider's report and idemgen's records.
type Class string

const (
	// ChargedNoRecord: the provider charged, and idemgen has no completed record of a success
	// for the call: money moved and the client may not know (the dangerous one). The record
	// is uncertain (resolvable: completed with the provider's outcome), released or absent
	// (its handler failed or it was abandoned: a late retry runs again under the same provider
	// key, which the provider deduplicates), completed with a failure status, or unknown to
	// the call log.
	ChargedNoRecord Class = "charged_no_record"
	// RecordNoCharge: a record completed with a success (2xx), and the provider's report shows
	// its call failed, or has no line for it in the report's window.
	RecordNoCharge Class = "record_no_charge"
	// AmountMismatch: both sides agree the call charged, on a different amount or currency.
	AmountMismatch Class = "amount_mismatch"
	// UncertainNotCharged: a record still uncertain that the report resolves as not charged
	// (a failed or declined charge; with Options.ReportComplete, also no line at all):
	// resolvable by releasing it.
	UncertainNotCharged Class = "uncertain_not_charged"
	// UncertainUnreported: a record still uncertain whose call the report does not mention,
	// in a report not declared complete: nothing resolves it yet.
	UncertainUnreported Class = "uncertain_unreported"
)

// Classes lists every class, in the order reports print them.
var Classes = []Class{ChargedNoRecord, RecordNoCharge, AmountMismatch, UncertainNotCharged, UncertainUnreported}

// Desync reports whether the class is a desynchronisation with the provider (the first three);
// the uncertain classes are records waiting for a resolution.
func (c Class) Desync() bool {
	return c == ChargedNoRecord || c == RecordNoCharge || c == AmountMismatch
}

// Action is what a confirmed resolution of a finding writes (Resolve).
type Action string

const (
	// NoAction: nothing can be resolved from the report (or not yet: a lease still runs).
	NoAction Action = ""
	// Complete completes the uncertain record with the provider's outcome, which then replays
	// to a late retry; a call whose record is gone has only its log settled.
	Complete Action = "complete"
	// Release releases the uncertain record: a late retry runs the handler again.
	Release Action = "release"
)

// Record states of a finding: what idemgen holds for the call.
const (
	RecordUnknown   = "unknown"   // the call log has no call of this provider key
	RecordRunning   = "running"   // its call phase or completion is in progress (lease running)
	RecordUncertain = "uncertain" // running, uncertain (see store.Uncertainty)
	RecordAbsent    = "absent"    // no record: abandoned and swept, or held by a paired lease store
	RecordCompleted = "completed" // completed with a success (2xx)
	RecordFailed    = "failed"    // completed with another status (a decline the handler stored)
	RecordReleased  = "released"  // released after its call phase (the handler failed)
	RecordResolved  = "resolved"  // settled by an earlier resolution
)

// Finding is one desynchronisation or one uncertain record.
type Finding struct {
	Class Class
	// ProviderKey is the call's provider key; Line the report's line (nil when the report has
	// none for the call); Call the call log's entry (nil when it has none of the key).
	ProviderKey string
	Line        *Line
	Call        *store.CallRecord
	// Record is what idemgen holds for the call (RecordUncertain, ...); Detail says it in a
	// sentence; Action is what a confirmed resolution would write.
	Record string
	Detail string
	Action Action
}

// MarshalJSON writes the finding as `idemgen reconcile --format json` prints it: class,
// provider_key, record, action, detail, and the report's and the call log's sides.
func (f Finding) MarshalJSON() ([]byte, error) {
	type report struct {
		Line     int        `json:"line"`
		Status   string     `json:"status"`
		Amount   *int64     `json:"amount,omitempty"`
		Currency string     `json:"currency,omitempty"`
		Time     *time.Time `json:"time,omitempty"`
	}
	type call struct {
		Label     string     `json:"label"`
		Operation string     `json:"operation"`
		Record    string     `json:"record_ref"`
		Token     int64      `json:"fencing_token"`
		StartedAt time.Time  `json:"started_at"`
		Outcome   string     `json:"outcome"`
		Status    int        `json:"status,omitempty"`
		Amount    *int64     `json:"amount,omitempty"`
		Currency  string     `json:"currency,omitempty"`
		Uncertain string     `json:"uncertain,omitempty"`
		SettledAt *time.Time `json:"settled_at,omitempty"`
	}
	out := struct {
		Class       Class   `json:"class"`
		ProviderKey string  `json:"provider_key"`
		Record      string  `json:"record"`
		Action      Action  `json:"action,omitempty"`
		Detail      string  `json:"detail"`
		Report      *report `json:"report,omitempty"`
		Call        *call   `json:"call,omitempty"`
	}{Class: f.Class, ProviderKey: f.ProviderKey, Record: f.Record, Action: f.Action, Detail: f.Detail}
	if l := f.Line; l != nil {
		r := &report{Line: l.Number, Status: l.Status, Currency: l.Currency}
		if l.HasAmount {
			r.Amount = &l.Amount
		}
		if !l.Time.IsZero() {
			r.Time = &l.Time
		}
		out.Report = r
	}
	if c := f.Call; c != nil {
		v := &call{Label: c.Label, Operation: c.Operation, Record: c.Ref, Token: c.Token, StartedAt: c.StartedAt.UTC(),
			Outcome: c.Outcome.String(), Status: c.Status, Currency: c.Currency, Uncertain: c.Record.Uncertain.String()}
		if c.Currency != "" {
			v.Amount = &c.Amount
		}
		if !c.SettledAt.IsZero() {
			t := c.SettledAt.UTC()
			v.SettledAt = &t
		}
		out.Call = v
	}
	return json.Marshal(out)
}

// statusKind is what a report line's status says about the charge.
type statusKind uint8

const (
	statusOther      statusKind = iota // neither (pending, refunded, disputed...): the line is not compared
	statusCharged                      // Options.Charged
	statusNotCharged                   // Options.NotCharged
)

// verdict is what classifying a report line found.
type verdict uint8

const (
	verdictMatched  verdict = iota // both sides agree
	verdictFinding                 // a finding
	verdictInFlight                // charged, and the record's call phase or completion is still running
	verdictIgnored                 // the line's status is neither charged nor not charged
	verdictUnknown                 // not charged, and the call log does not know the key
)

// classifyLine compares one report line (whose status kind is k) with the call log's entry of
// its key (nil when there is none).
func classifyLine(l *Line, k statusKind, c *store.CallRecord) (verdict, Finding) {
	f := Finding{ProviderKey: l.ProviderKey, Line: l, Call: c}
	if k == statusOther {
		return verdictIgnored, f
	}
	charged := k == statusCharged
	if c == nil {
		if !charged {
			return verdictUnknown, f
		}
		f.Class, f.Record = ChargedNoRecord, RecordUnknown
		f.Detail = fmt.Sprintf("the provider charged (%s); the call log has no call of this provider key (older than its retention, made by another service or environment, or not recorded)", l.Status)
		return verdictFinding, f
	}
	outcome, status := c.Outcome, c.Status
	if outcome == store.CallStarted && c.Record.State == store.Completed {
		// The record completed without settling its calls (a completion that did not know of
		// them): its stored status is the outcome.
		outcome, status = store.CallCompleted, c.Record.Status
	}
	switch outcome {
	case store.CallCompleted, store.CallResolvedCompleted:
		success := status >= 200 && status < 300
		switch {
		case success && charged:
			if d := amountDiffers(l, c); d != "" {
				f.Class, f.Record, f.Detail = AmountMismatch, RecordCompleted, d
				return verdictFinding, f
			}
			return verdictMatched, f
		case success:
			f.Class, f.Record = RecordNoCharge, RecordCompleted
			f.Detail = fmt.Sprintf("the record replays %d (a success); the provider reports %s", status, l.Status)
			return verdictFinding, f
		case charged:
			f.Class, f.Record = ChargedNoRecord, RecordFailed
			f.Detail = fmt.Sprintf("the record replays %d; the provider charged (%s)", status, l.Status)
			return verdictFinding, f
		}
		return verdictMatched, f
	case store.CallReleased, store.CallResolvedReleased:
		if !charged {
			return verdictMatched, f
		}
		f.Class, f.Record = ChargedNoRecord, RecordReleased
		f.Detail = fmt.Sprintf("the provider charged (%s); the record was released after its call phase (its handler failed): a late retry runs again under this provider key", l.Status)
		if outcome == store.CallResolvedReleased {
			f.Record = RecordResolved
			f.Detail = fmt.Sprintf("the provider charged (%s); an earlier resolution released the record", l.Status)
		} else {
			f.Action = Complete
		}
		return verdictFinding, f
	}
	// Started: what the record says.
	rec := c.Record
	switch {
	case rec.State == store.Running && rec.Uncertain == store.NotUncertain:
		if charged {
			return verdictInFlight, f
		}
		return verdictMatched, f // the call phase runs; its completion will tell
	case rec.State == store.Running:
		f.Record = RecordUncertain
		if charged {
			f.Class = ChargedNoRecord
			f.Detail = fmt.Sprintf("the provider charged (%s); the record is uncertain (%s)", l.Status, rec.Uncertain)
			f.Action = actionOnce(rec, Complete, &f.Detail)
		} else {
			f.Class = UncertainNotCharged
			f.Detail = fmt.Sprintf("the provider did not charge (%s); the record is uncertain (%s)", l.Status, rec.Uncertain)
			f.Action = actionOnce(rec, Release, &f.Detail)
		}
		return verdictFinding, f
	}
	if !charged {
		return verdictMatched, f
	}
	f.Class, f.Record, f.Action = ChargedNoRecord, RecordAbsent, Complete
	f.Detail = fmt.Sprintf("the provider charged (%s); the record is gone (abandoned and swept, or held by a paired lease store)", l.Status)
	return verdictFinding, f
}

// actionOnce is a, or NoAction while the record's lease still runs (its owner may still
// complete it; the detail says so).
func actionOnce(rec store.CallRecordState, a Action, detail *string) Action {
	if rec.LeaseEnded {
		return a
	}
	*detail += "; resolvable once its lease ends"
	return NoAction
}

// amountDiffers compares the amounts of a charge both sides agree on; "" when they match or
// either side did not say.
func amountDiffers(l *Line, c *store.CallRecord) string {
	if c.Currency == "" || !l.HasAmount {
		return ""
	}
	if l.Amount == c.Amount && (l.Currency == "" || strings.EqualFold(l.Currency, c.Currency)) {
		return ""
	}
	return fmt.Sprintf("the provider charged %d %s; the handler recorded %d %s", l.Amount, l.Currency, c.Amount, c.Currency)
}

// classifyUnreported looks at a logged call of the window that no report line mentions; ok is
// false when that is no finding.
func classifyUnreported(c *store.CallRecord, complete bool) (Finding, bool) {
	f := Finding{ProviderKey: c.ProviderKey, Call: c}
	outcome, status := c.Outcome, c.Status
	if outcome == store.CallStarted && c.Record.State == store.Completed {
		outcome, status = store.CallCompleted, c.Record.Status
	}
	switch {
	case (outcome == store.CallCompleted || outcome == store.CallResolvedCompleted) && status >= 200 && status < 300:
		f.Class, f.Record = RecordNoCharge, RecordCompleted
		f.Detail = fmt.Sprintf("the record replays %d (a success); the provider's report has no line for this provider key", status)
		return f, true
	case outcome == store.CallStarted && c.Record.State == store.Running && c.Record.Uncertain != store.NotUncertain:
		f.Record = RecordUncertain
		if complete {
			f.Class = UncertainNotCharged
			f.Detail = fmt.Sprintf("the record is uncertain (%s); the complete report has no line for this provider key: the call never charged", c.Record.Uncertain)
			f.Action = actionOnce(c.Record, Release, &f.Detail)
		} else {
			f.Class = UncertainUnreported
			f.Detail = fmt.Sprintf("the record is uncertain (%s); the report has no line for this provider key (not declared complete: nothing resolves it yet)", c.Record.Uncertain)
		}
		return f, true
	}
	return f, false
}
