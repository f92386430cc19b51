package runtime

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// envelopeWriters are the writers of the contract table's error envelopes
// (defaults.Envelope.Writer), each made from its row: what a problem is answered with (status,
// type, code, message, headers) is the row's data, the writer only lays it out. A row whose
// envelope is RFC 9457 problem details has no entry: its errors go to Config.ProblemWriter
// (ProblemJSON unless replaced). A new envelope is an entry here and a row that names it.
var envelopeWriters = map[string]func(row defaults.Profile) ProblemWriter{
	"stripe": stripeEnvelope,
}

// StripeProfile returns Stripe's contract, the contract table's stripe row
// (NamedProfile("stripe")), so that Stripe's SDKs work unchanged against the runtime
// (docs/stripe.md gives the sources: docs.stripe.com/api/idempotent_requests, /errors,
// /error-codes, and stripe-go's retry rules):
//   - errors in Stripe's envelope (StripeErrors);
//   - keys of 1 to 255 characters, Stripe's rule;
//   - Stripe-Account folded into the scope, so a connected account's keys are its own, and
//     refused unless it is an account id (acct_ and letters and digits);
//   - concurrency.wait 5s: stripe-go does not retry a 409 in Stripe's envelope, so a duplicate
//     waits for the first request and replays;
//   - Idempotency-Key echoed on every answer, as Stripe's are;
//   - a Request-Id on every answer ("req_" and 14 alphanumerics), stored with the response;
//     Original-Request names the execution whose response it is, so a replay gets a new
//     Request-Id and names the first one.
//
// Each call returns a new value; changing it changes only the operations given that value.
func StripeProfile() *Profile { return NamedProfile("stripe") }

// stripeErrors is StripeErrors: the stripe row's envelope.
var stripeErrors = func() ProblemWriter {
	row, _ := defaults.ProfileNamed("stripe")
	return stripeEnvelope(row)
}()

// stripeEnvelope writes Stripe's error envelope, {"error":{type, code, message, param,
// doc_url}} as application/json, with row's answer to each problem.
func stripeEnvelope(row defaults.Profile) ProblemWriter {
	answers := rowAnswers(row)
	return func(w http.ResponseWriter, _ *http.Request, p Problem) {
		a := answers[p.Name]
		type stripeError struct {
			Type    string `json:"type"`
			Code    string `json:"code,omitempty"`
			Message string `json:"message"`
			Param   string `json:"param,omitempty"`
			DocURL  string `json:"doc_url,omitempty"`
		}
		e := stripeError{Type: a.Type, Code: a.Code, Message: answerMessage(a, p), Param: a.Param, DocURL: a.DocURL}
		if e.Type == "" { // a problem the row does not know
			e.Type = row.Envelope.DefaultType
		}
		if e.Param == "" {
			e.Param = p.Param()
		}
		body, _ := json.Marshal(struct {
			Error stripeError `json:"error"`
		}{e})
		WriteProblem(w, answerProblem(w, a, p), row.Envelope.ContentType, body)
	}
}

// rowAnswers is row's answer to every problem, by name.
func rowAnswers(row defaults.Profile) map[string]defaults.Answer {
	out := map[string]defaults.Answer{}
	for _, p := range defaults.Problems() {
		out[p.Name] = row.Answer(p.Name)
	}
	return out
}

// answerMessage is the message of a's document for p: the row's message, "{detail}" in it
// replaced by p's detail, or p's own message.
func answerMessage(a defaults.Answer, p Problem) string {
	if a.Message == "" {
		return p.Message()
	}
	return strings.ReplaceAll(a.Message, "{detail}", p.Detail)
}

// answerProblem sets a's headers on w and returns p at a's status. The status of a problem the
// runtime answers with a status of its own (unauthenticated: Config.ScopeStatus) is kept
// unless the row changes it.
func answerProblem(w http.ResponseWriter, a defaults.Answer, p Problem) Problem {
	for _, h := range a.Headers {
		w.Header().Set(h.Name, h.Value)
	}
	if a.Status != 0 && a.Status != defaults.ProblemStatus(p.Name) {
		p.Status = a.Status
	}
	return p
}
