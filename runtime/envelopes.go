package runtime

import (
	"encoding/json"
	"fmt"
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
	"acp":    acpEnvelope,
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

// acpEnvelope writes the Agentic Commerce Protocol's flat error object (agentic-checkout RFC
// section 3.1), {"type", "code", "message", "param"} as application/json, with row's answer
// to each problem (AnswerAt: an answer for a parameter, such as an unsupported API-Version,
// wins over the problem's). ACP's Error schemas require a code: a problem the row gives none
// is coded by its name in snake case (store-unavailable is store_unavailable). param is the
// member at fault as an RFC 9535 JSONPath ($.line_items[0].id) and is left out for a
// parameter, which a JSONPath of the body cannot name; the answer's Allowed member lists the
// values an enum allows.
func acpEnvelope(row defaults.Profile) ProblemWriter {
	return func(w http.ResponseWriter, _ *http.Request, p Problem) {
		a := row.AnswerAt(p.Name, p.Pointer)
		e := struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param,omitempty"`
		}{Type: a.Type, Code: a.Code, Message: answerMessage(a, p), Param: a.Param}
		if e.Code == "" {
			e.Code = strings.ReplaceAll(p.Name, "-", "_")
		}
		if e.Param == "" {
			e.Param = jsonPath(p.Pointer)
		}
		body, _ := json.Marshal(e)
		if a.Allowed != "" && p.Allowed != nil {
			name, _ := json.Marshal(a.Allowed)
			list, _ := json.Marshal(p.Allowed)
			body = append(append(append(append(body[:len(body)-1], ','), name...), ':'), append(list, '}')...)
		}
		WriteProblem(w, answerProblem(w, a, p), row.Envelope.ContentType, body)
	}
}

// jsonPath is a body member's JSON pointer (RFC 6901) as an RFC 9535 normalized-style JSONPath:
// /line_items/0/id is $.line_items[0].id, a name that is not a plain identifier is bracketed
// ($['tip amount']). A token of digits is read as an array index (a pointer does not say which
// it is). A parameter's pointer (/path/…, /query/…, /header/…) and "" give "".
func jsonPath(pointer string) string {
	if pointer == "" {
		return ""
	}
	toks := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	switch toks[0] {
	case "path", "query", "header", "cookie":
		if len(toks) == 2 {
			return ""
		}
	}
	var b strings.Builder
	b.WriteByte('$')
	for _, t := range toks {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		switch {
		case t != "" && strings.Trim(t, "0123456789") == "" && (t == "0" || t[0] != '0'):
			b.WriteString("[" + t + "]")
		case plainName(t):
			b.WriteString("." + t)
		default:
			b.WriteString("['")
			for _, r := range t {
				switch {
				case r == '\\' || r == '\'':
					b.WriteByte('\\')
					b.WriteRune(r)
				case r < 0x20:
					fmt.Fprintf(&b, "\\u%04x", r)
				default:
					b.WriteRune(r)
				}
			}
			b.WriteString("']")
		}
	}
	return b.String()
}

// plainName reports whether s is a JSONPath member-name-shorthand (RFC 9535 section 2.5.1.1):
// a letter or '_' (or a non-ASCII character), then those and digits.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || r >= 0x80:
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
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
