package conform

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// expectations are the answers an operation's contract gives. They are derived from the
// contract the spec declares, never written here: the statuses and Retry-After of the
// contract table's row the operation names (runtime/defaults.Profiles; idemgen's own row when
// it names none), changed by its errors mapping where it has one; the replay headers of the
// table; and, only when a profile names the vocabulary (the spec's `profile:` or conform's
// --profile), the row's problem types and codes. A service that answers a mismatch 422 with
// `type: about:blank`, or with a plain JSON error, keeps the contract a spec without a profile
// declares.
type expectations struct {
	row defaults.Profile
	// named: a profile names the row, so its types and codes are part of the contract.
	named                                      bool
	mismatch, inFlight, keyMissing, keyInvalid answer
	// replayExempt are stored headers a replay carries anew by design; replayLinks pair a
	// replay's header with the first answer's header whose value it must repeat.
	replayExempt []string
	replayLinks  [][2]string
	// rules are the operation's replay.statuses.
	rules []defaults.StatusRule
	// echo is the key header every answer repeats as the request sent it (the row's EchoKey
	// under a named profile, or the operation's key.echo), "" when none is promised.
	echo string
	// keyExpires: the operation's responses declare Idempotency-Key-Expires, so every stored
	// answer and replay must carry it (an IMF-fixdate not in the past), and a replay the same
	// instant as the answer it repeats.
	keyExpires bool
}

// answer is an expected refusal: its status, and, under a named profile, what its body must
// name.
type answer struct {
	status int
	// problems are the problem names the answer stands for (one, or a refusal that either of
	// two problems explains).
	problems []string
	// types are the accepted values at the envelope's TypeAt (under a named profile), code the
	// value at its CodeAt ("" for any).
	types []string
	code  string
	env   defaults.Envelope
	named bool
	// declared are the operation's declared error responses: an answer must follow the one
	// for its status.
	declared []model.ErrorResponse
	// retryAfter requires a Retry-After header.
	retryAfter bool
	// echo is expectations.echo: the answer must repeat that header as sent.
	echo string
}

// expectationsFor derives op's expectations; profile, when not "", is --profile and names the
// row instead of the spec's own `profile:`.
func expectationsFor(op *model.Operation, profile string) expectations {
	name := string(op.Settings.Profile)
	if profile != "" {
		name = profile
	}
	row, ok := defaults.ProfileNamed(name)
	if !ok {
		row, _ = defaults.ProfileNamed(defaults.ProfileDefault)
	}
	e := expectations{row: row, named: name != "", keyExpires: slices.Contains(op.ResponseHeaders, defaults.KeyExpiresHeader)}
	for _, r := range op.Settings.Replay.Statuses {
		e.rules = append(e.rules, defaults.StatusRule(r))
	}
	if e.rules == nil {
		e.rules = defaults.Statuses()
	}
	if k := op.Settings.Key; k.Carrier == model.CarrierHeader && ((row.EchoKey && e.named) || k.Echo) {
		e.echo = k.Header
	}
	e.mismatch = e.answer(op, defaults.ProblemPayloadMismatch)
	e.inFlight = e.answer(op, defaults.ProblemInFlight)
	e.keyMissing = e.answer(op, defaults.ProblemKeyMissing)
	// A body-carried key of the wrong type is refused by the body's decoder first.
	e.keyInvalid = e.answer(op, defaults.ProblemKeyInvalid, defaults.ProblemBodyInvalid)
	// A key longer than a valid key can be is not repeated back (runtime: echoKey): the
	// refusals of malformed keys are judged without the echo.
	e.keyInvalid.echo = ""
	if id := row.RequestID; id.Header != "" {
		e.replayExempt = append(e.replayExempt, id.Header)
		if id.Original != "" {
			e.replayExempt = append(e.replayExempt, id.Original)
			e.replayLinks = append(e.replayLinks, [2]string{id.Original, id.Header})
		}
	}
	return e
}

// answer is the expected answer to the problem name (or any of also, at the same status): the
// row's, at the status the operation's errors mapping gives it when it gives one.
func (e expectations) answer(op *model.Operation, name string, also ...string) answer {
	a := e.row.Answer(name)
	out := answer{status: a.Status, retryAfter: a.RetryAfter, code: a.Code, env: e.row.Envelope, named: e.named, declared: op.ErrorResponses, echo: e.echo}
	if errs := op.Settings.Errors; errs != nil {
		for _, d := range errs.Docs {
			if d.Problem == name && d.Status != 0 {
				out.status = d.Status
			}
		}
		// The mapping writes its own documents: the row's envelope does not describe them.
		out.named, out.code = false, ""
	}
	for _, n := range append([]string{name}, also...) {
		out.problems = append(out.problems, n)
		if t := e.row.Answer(n).Type; !contains(out.types, t) {
			out.types = append(out.types, t)
		}
	}
	return out
}

// final reports whether status is final (stored and replayed) under the operation's
// replay.statuses: defaults.Final, the rule the runtime stores by.
func (e expectations) final(status int) bool { return defaults.Final(e.rules, status) }

// judge returns "" when e is the answer, else what is wrong with it.
func (a answer) judge(e *Exchange) string {
	if !e.ok() {
		return fmt.Sprintf("want %d, got no answer: %s", a.status, e.Err)
	}
	if e.Status != a.status {
		return fmt.Sprintf("want %d (%s), got %d", a.status, strings.Join(a.problems, " or "), e.Status)
	}
	if a.retryAfter && e.header("Retry-After") == "" {
		return fmt.Sprintf("the %d has no Retry-After: a client cannot know when to retry", e.Status)
	}
	if why := judgeDeclared(a.declared, e); why != "" {
		return why
	}
	if why := echoed(a.echo, e); why != "" {
		return why
	}
	if !a.named {
		return ""
	}
	var doc any
	if err := json.Unmarshal(e.respBodyRaw, &doc); err != nil {
		return fmt.Sprintf("want an error document in the profile's envelope (%s), got %s", a.env.ContentType, oneLine(e.RespBody))
	}
	if a.env.TypeAt != "" {
		got, _ := getPointer(doc, pointerTokens(a.env.TypeAt))
		s, _ := got.(string)
		if !a.typeMatches(s) {
			return fmt.Sprintf("want %s %s at %s, got %s", a.what(), strings.Join(a.types, " or "), a.env.TypeAt, jsonText(got))
		}
	}
	if a.code != "" && a.env.CodeAt != "" {
		got, _ := getPointer(doc, pointerTokens(a.env.CodeAt))
		if s, _ := got.(string); s != a.code {
			return fmt.Sprintf("want the code %s at %s, got %s", a.code, a.env.CodeAt, jsonText(got))
		}
	}
	return ""
}

// echoed says how e's answer fails to repeat the request's header name as sent ("" when it
// does, when name is "", or when the request did not send it on exactly one line).
func echoed(name string, e *Exchange) string {
	sent := e.sent(name)
	if name == "" || len(sent) != 1 || !e.ok() {
		return ""
	}
	if got := e.respHeaderRaw.Values(name); len(got) != 1 || got[0] != sent[0] {
		return fmt.Sprintf("the answer does not repeat the %s header as sent (%q): got %q, and the contract echoes it on every answer", name, sent[0], strings.Join(got, ", "))
	}
	return ""
}

// typeMatches reports whether the type member s is one of the accepted types: equal, or, for a
// URI type (RFC 9457 under a base the service chooses), ending in "/" and the type.
func (a answer) typeMatches(s string) bool {
	for _, t := range a.types {
		if s == t || (a.env.TypeIsURI && strings.HasSuffix(s, "/"+t)) {
			return true
		}
	}
	return false
}

func (a answer) what() string {
	if a.env.TypeIsURI {
		return "the problem type"
	}
	return "the error type"
}

// pointerTokens splits an RFC 6901 pointer into its unescaped tokens.
func pointerTokens(p string) []string {
	if p == "" || p == "/" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// mediaType is a Content-Type's media type, lower case, without parameters.
// expiresSlack is how far apart a replay's Idempotency-Key-Expires may be from the first
// answer's: both name the end of one record's retention, each rounded down to the second by a
// clock read a moment apart.
const expiresSlack = 2 * time.Second

// keyExpiresProblem says what is wrong with the Idempotency-Key-Expires of e, a stored answer
// or a replay ("" when nothing): absent, not an IMF-fixdate, already past when it was sent (by
// the answer's Date, else this machine's clock), or, for a replay of first, another instant
// than the first answer's.
func (x expectations) keyExpiresProblem(e, first *Exchange) string {
	if !x.keyExpires || !e.ok() {
		return ""
	}
	name := defaults.KeyExpiresHeader
	v := e.header(name)
	if v == "" {
		return "no " + name + " (the operation's responses declare it)"
	}
	at, err := http.ParseTime(v)
	if err != nil || at.UTC().Format(http.TimeFormat) != v {
		return fmt.Sprintf("%s %q is not an HTTP date (IMF-fixdate, RFC 9110 section 5.6.7)", name, v)
	}
	sent := e.Start.Add(time.Duration(e.Took))
	if d, err := http.ParseTime(e.header("Date")); err == nil {
		sent = d
	}
	if at.Before(sent.Add(-time.Second)) {
		return fmt.Sprintf("%s %q is before the answer was sent (%s): the key would already have expired", name, v, sent.UTC().Format(http.TimeFormat))
	}
	if first == nil || first == e {
		return ""
	}
	if fv := first.header(name); fv != "" {
		if fat, err := http.ParseTime(fv); err == nil && (at.Sub(fat) > expiresSlack || fat.Sub(at) > expiresSlack) {
			return fmt.Sprintf("%s %q, the first answer said %q: one record's retention ends once", name, v, fv)
		}
	}
	return ""
}

func mediaType(v string) string {
	if mt, _, err := mime.ParseMediaType(v); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "an empty body"
	}
	return s
}
