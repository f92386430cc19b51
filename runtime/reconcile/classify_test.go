package reconcile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/store"
)

// Every combination of a report line's status and what the call log knows, against the class,
// the record state and the action the contract of docs/runtime.md gives it.
func TestClassifyLine(t *testing.T) {
	line := func(status string, amount int64, currency string) *Line {
		return &Line{Number: 2, ProviderKey: pk1, Status: status, Amount: amount, HasAmount: true, Currency: currency}
	}
	call := func(o store.CallOutcome, status int, rec store.CallRecordState) *store.CallRecord {
		return &store.CallRecord{Call: store.Call{Label: "charge", ProviderKey: pk1, Amount: 1250, Currency: "EUR"},
			Outcome: o, Status: status, Token: 1, Record: rec}
	}
	running := store.CallRecordState{State: store.Running, Token: 1}
	ended := store.CallRecordState{State: store.Running, Token: 2, LeaseEnded: true, Uncertain: store.UncertainLeaseEnded}
	marked := store.CallRecordState{State: store.Running, Token: 1, Uncertain: store.UncertainCompletionFailed}
	unsettled := store.CallRecordState{State: store.Completed, Status: 201}
	noCurrency := call(store.CallCompleted, 201, store.CallRecordState{})
	noCurrency.Currency = ""

	for name, tc := range map[string]struct {
		line    *Line
		kind    statusKind
		call    *store.CallRecord
		verdict verdict
		class   Class
		record  string
		action  Action
	}{
		"unknown-charged":           {line("succeeded", 1250, "EUR"), statusCharged, nil, verdictFinding, ChargedNoRecord, RecordUnknown, NoAction},
		"unknown-failed":            {line("failed", 1250, "EUR"), statusNotCharged, nil, verdictUnknown, "", "", NoAction},
		"completed-charged":         {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallCompleted, 201, store.CallRecordState{}), verdictMatched, "", "", NoAction},
		"completed-other-amount":    {line("succeeded", 1300, "EUR"), statusCharged, call(store.CallCompleted, 201, store.CallRecordState{}), verdictFinding, AmountMismatch, RecordCompleted, NoAction},
		"completed-other-currency":  {line("succeeded", 1250, "USD"), statusCharged, call(store.CallCompleted, 201, store.CallRecordState{}), verdictFinding, AmountMismatch, RecordCompleted, NoAction},
		"completed-no-amount":       {line("succeeded", 9, "USD"), statusCharged, noCurrency, verdictMatched, "", "", NoAction},
		"resolved-completed":        {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallResolvedCompleted, 200, store.CallRecordState{}), verdictMatched, "", "", NoAction},
		"completed-failed":          {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallCompleted, 201, store.CallRecordState{}), verdictFinding, RecordNoCharge, RecordCompleted, NoAction},
		"declined-charged":          {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallCompleted, 402, store.CallRecordState{}), verdictFinding, ChargedNoRecord, RecordFailed, NoAction},
		"declined-failed":           {line("declined", 1250, "EUR"), statusNotCharged, call(store.CallCompleted, 402, store.CallRecordState{}), verdictMatched, "", "", NoAction},
		"released-charged":          {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallReleased, 0, store.CallRecordState{}), verdictFinding, ChargedNoRecord, RecordReleased, Complete},
		"released-failed":           {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallReleased, 0, store.CallRecordState{}), verdictMatched, "", "", NoAction},
		"resolved-released-charged": {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallResolvedReleased, 0, store.CallRecordState{}), verdictFinding, ChargedNoRecord, RecordResolved, NoAction},
		"running-charged":           {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallStarted, 0, running), verdictInFlight, "", "", NoAction},
		"running-failed":            {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallStarted, 0, running), verdictMatched, "", "", NoAction},
		"uncertain-charged":         {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallStarted, 0, ended), verdictFinding, ChargedNoRecord, RecordUncertain, Complete},
		"marked-charged":            {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallStarted, 0, marked), verdictFinding, ChargedNoRecord, RecordUncertain, NoAction},
		"uncertain-failed":          {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallStarted, 0, ended), verdictFinding, UncertainNotCharged, RecordUncertain, Release},
		"absent-charged":            {line("succeeded", 1250, "EUR"), statusCharged, call(store.CallStarted, 0, store.CallRecordState{}), verdictFinding, ChargedNoRecord, RecordAbsent, Complete},
		"absent-failed":             {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallStarted, 0, store.CallRecordState{}), verdictMatched, "", "", NoAction},
		"unsettled-failed":          {line("failed", 1250, "EUR"), statusNotCharged, call(store.CallStarted, 0, unsettled), verdictFinding, RecordNoCharge, RecordCompleted, NoAction},
		"pending":                   {line("pending", 1250, "EUR"), statusOther, call(store.CallStarted, 0, ended), verdictIgnored, "", "", NoAction},
	} {
		t.Run(name, func(t *testing.T) {
			v, f := classifyLine(tc.line, tc.kind, tc.call)
			if v != tc.verdict || (v == verdictFinding && (f.Class != tc.class || f.Record != tc.record || f.Action != tc.action || f.Detail == "")) {
				t.Errorf("verdict %d %s/%s/%q (%s), want %d %s/%s/%q", v, f.Class, f.Record, f.Action, f.Detail, tc.verdict, tc.class, tc.record, tc.action)
			}
			if v == verdictFinding {
				b, err := json.Marshal(f)
				if err != nil || !strings.Contains(string(b), `"class":"`+string(tc.class)+`"`) || !strings.Contains(string(b), `"line":2`) {
					t.Errorf("JSON %s, %v", b, err)
				}
			}
		})
	}
}

func TestClassifyUnreported(t *testing.T) {
	call := func(o store.CallOutcome, status int, rec store.CallRecordState) *store.CallRecord {
		return &store.CallRecord{Call: store.Call{Label: "charge", ProviderKey: pk1}, Outcome: o, Status: status, Record: rec}
	}
	ended := store.CallRecordState{State: store.Running, LeaseEnded: true, Uncertain: store.UncertainLeaseEnded}
	for name, tc := range map[string]struct {
		call     *store.CallRecord
		complete bool
		ok       bool
		class    Class
		action   Action
	}{
		"completed":          {call(store.CallCompleted, 201, store.CallRecordState{}), false, true, RecordNoCharge, NoAction},
		"declined":           {call(store.CallCompleted, 402, store.CallRecordState{}), false, false, "", NoAction},
		"uncertain":          {call(store.CallStarted, 0, ended), false, true, UncertainUnreported, NoAction},
		"uncertain-complete": {call(store.CallStarted, 0, ended), true, true, UncertainNotCharged, Release},
		"running":            {call(store.CallStarted, 0, store.CallRecordState{State: store.Running}), true, false, "", NoAction},
		"released":           {call(store.CallReleased, 0, store.CallRecordState{}), true, false, "", NoAction},
		"absent":             {call(store.CallStarted, 0, store.CallRecordState{}), true, false, "", NoAction},
	} {
		t.Run(name, func(t *testing.T) {
			f, ok := classifyUnreported(tc.call, tc.complete)
			if ok != tc.ok || (ok && (f.Class != tc.class || f.Action != tc.action)) {
				t.Errorf("%v %s %q, want %v %s %q", ok, f.Class, f.Action, tc.ok, tc.class, tc.action)
			}
		})
	}
}
