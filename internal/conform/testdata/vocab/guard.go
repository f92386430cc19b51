// Package vocab is the second corpus of idempotency layers for `idemgen conform`: one layer,
// written independently of the first corpus (internal/conform/testdata/mutants) and of the
// runtime — an explicit state machine per key, its own fingerprint and error writers — that
// answers in another vocabulary than idemgen's: RFC 9457 problems of `type: about:blank`
// (problem.yaml), plain JSON errors (plain.yaml), Stripe's error envelope with a reused key
// answered 400 under `profile: stripe` (stripe.yaml), the Agentic Commerce Protocol's flat error
// object with opaque keys scoped to the endpoint path under `profile: acp` (acp.yaml), or the
// IETF draft's sf-string keys under `profile: ietf` (ietf.yaml). Its correct form must pass in every
// vocabulary; each bug mode, the same twelve as the first corpus's, must fail the check that
// names it. The business handlers (payments and refunds, their effects and transactions) are
// the first corpus's Kit, which is not under test.
package vocab

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/idemgen/idemgen/internal/conform/testdata/mutants"
)

// Server is one server of the corpus: a vocabulary and a bug ("" for none).
type Server struct {
	Vocab Vocab
	Bug   Bug
}

// Bug names one bug mode; each is one change to one step of the guard.
type Bug string

// The bug modes, as the first corpus names them, with the conform check that must catch each.
var Bugs = map[Bug]string{
	"race":          "concurrent-duplicates", // the key is looked up, and stored only after the handler ran
	"rawfp":         "equivalent-spellings",  // the fingerprint is the raw bytes
	"nofp":          "mismatch",              // no fingerprint: any request under a known key replays
	"stored5xx":     "5xx-not-stored",        // a 5xx is stored and replayed
	"processing200": "concurrent-duplicates", // a duplicate in flight gets 200 {"state":"processing"}
	"notenant":      "tenant-isolation",      // records keyed by the key alone
	"nottl":         "5xx-releases-key",      // a failed request never releases its key
	"owntxn":        "5xx-rolls-back",        // the handler's writes commit before the record
	"replaystatus":  "replay",                // a replay is the body alone, as 200
	"router404":     "unrouted-not-stored",   // the guard wraps the router: its 404 is stored
	"decoderdiff":   "duplicate-members",     // the fingerprint keeps the first of a member named twice
	"noretryafter":  "concurrent-duplicates", // the in-flight answer has no Retry-After
}

// RowBugs are the bug modes of one vocabulary's contract (a row of the contract table), with
// the check that must catch each: they break what only that row asks.
var RowBugs = map[Vocab]map[Bug]string{
	ACP: {
		"noecho":      "first-request",       // the key is not echoed on the answers (RFC 3.1)
		"tenantscope": "key-other-operation", // keys per caller only, not per endpoint path (RFC 6.1)
		"acpcode":     "mismatch",            // a reused key answered 422 without ACP's code
	},
	IETF: {
		"bare": "key-malformed", // a key sent bare is taken: the field must be an sf-string
	},
}

// New returns the server and its kit (effects, for the oracle).
func New(s Server) (http.Handler, *mutants.Kit) {
	return mutants.New(mutants.Mutant{
		Name:    string(s.Bug),
		Outside: s.Bug == "router404",
		Layer: func(k *mutants.Kit) func(http.Handler) http.Handler {
			g := &guard{k: k, s: s, keys: map[string]*entry{}, rule: s.Vocab.keyRule()}
			return g.wrap
		},
	})
}

// state is where a key is: running its first request, or done with an answer.
type state int

const (
	running state = iota + 1
	done
)

type entry struct {
	state  state
	fp     string
	status int
	ctype  string
	loc    string
	body   []byte
}

type guard struct {
	k    *mutants.Kit
	s    Server
	rule keyRule
	mu   sync.Mutex
	keys map[string]*entry
}

// keyRule is the key rule a vocabulary's spec declares.
type keyRule struct {
	min, max int
	pattern  *regexp.Regexp
	// quoted: the field is an RFC 8941 sf-string whose content is the key (the IETF draft).
	quoted bool
	// opaque: any characters but control characters (ACP's opaque string).
	opaque bool
}

// read returns the key the field value sent carries, and whether the rule takes it.
func (r keyRule) read(sent string) (string, bool) {
	k := sent
	if r.quoted {
		u, err := strconv.Unquote(sent) // an sf-string's escapes (\" and \\) are Go's too
		if err != nil || !strings.HasPrefix(sent, `"`) || strings.ContainsFunc(u, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
			return "", false
		}
		k = u
	}
	if r.opaque && strings.ContainsFunc(k, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return "", false
	}
	n := utf8.RuneCountInString(k)
	return k, n >= r.min && n <= r.max && (r.pattern == nil || r.pattern.MatchString(k))
}

func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := g.s.Vocab
		tenant := mutants.Tenant(r)
		if tenant == "" {
			v.refuse(w, refusal{status: 401, what: "unauthenticated", msg: "no credentials"})
			return
		}
		keys := r.Header.Values("Idempotency-Key")
		if (v == Stripe || v == ACP) && len(keys) == 1 && g.s.Bug != "noecho" {
			// Stripe's and ACP's answers repeat the key (their rows' EchoKey): every one.
			w.Header().Set("Idempotency-Key", keys[0])
		}
		var key string
		switch {
		case len(keys) == 0 || keys[0] == "":
			v.refuse(w, v.keyMissing())
			return
		case len(keys) > 1:
			v.refuse(w, v.keyInvalid())
			return
		default:
			var ok bool
			rule := g.rule
			if g.s.Bug == "bare" && !strings.HasPrefix(keys[0], `"`) {
				rule.quoted = false
			}
			if key, ok = rule.read(keys[0]); !ok {
				v.refuse(w, v.keyInvalid())
				return
			}
		}
		raw := mutants.ReadBody(r)
		fp, ok := g.fingerprint(r.URL.Path, raw)
		if !ok {
			v.refuse(w, refusal{status: 400, what: "invalid", msg: "the body is not JSON"})
			return
		}
		id := tenant + "\n" + key
		if v == ACP && g.s.Bug != "tenantscope" {
			// ACP scopes a key to the caller and the endpoint path (RFC section 6.1).
			id = tenant + "\n" + r.URL.Path + "\n" + key
		}
		if g.s.Bug == "notenant" {
			id = key
		}

		g.mu.Lock()
		e := g.keys[id]
		if e == nil && g.s.Bug != "race" {
			g.keys[id] = &entry{state: running, fp: fp}
		}
		g.mu.Unlock()
		if e != nil {
			g.answerKnown(w, e, fp)
			return
		}

		tx, r := g.k.Begin(r)
		rec := mutants.NewRecorder()
		next.ServeHTTP(rec, r)
		g.finish(id, fp, tx, rec)
		mutants.Send(w, rec)
	})
}

// fingerprint is the request's identity: the path and the body's canonical JSON (members
// sorted by encoding/json, numbers by value, the last of a member named twice, as the
// handlers' decoder keeps it).
func (g *guard) fingerprint(path string, raw []byte) (string, bool) {
	switch g.s.Bug {
	case "nofp":
		return "", true
	case "rawfp":
		sum := sha256.Sum256(append([]byte(path+"\n"), raw...))
		return fmt.Sprintf("%x", sum), true
	case "decoderdiff":
		fp, err := mutants.Canonical(path, raw, false) // first member wins
		return fp, err == nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false
	}
	canon, _ := json.Marshal(v)
	sum := sha256.Sum256(append([]byte(path+"\n"), canon...))
	return fmt.Sprintf("%x", sum), true
}

// answerKnown answers a request whose key has an entry.
func (g *guard) answerKnown(w http.ResponseWriter, e *entry, fp string) {
	v := g.s.Vocab
	g.mu.Lock()
	st, efp, status, ctype, loc, body := e.state, e.fp, e.status, e.ctype, e.loc, e.body
	g.mu.Unlock()
	switch {
	case efp != fp && g.s.Bug == "acpcode":
		v.refuse(w, refusal{status: 422, what: "key_reused", msg: "this key was used with another request"})
	case efp != fp:
		v.refuse(w, v.mismatch())
	case st == done && g.s.Bug == "replaystatus":
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write(body)
	case st == done:
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		if loc != "" {
			w.Header().Set("Location", loc)
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(status)
		w.Write(body)
	case g.s.Bug == "processing200":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"state":"processing"}`))
	default:
		a := v.inFlight()
		if g.s.Bug == "noretryafter" {
			a.retryAfter = 0
		}
		v.refuse(w, a)
	}
}

// finish ends the first request: a final answer is kept with its effects; a server error
// rolls them back and frees the key.
func (g *guard) finish(id, fp string, tx *mutants.Tx, rec *mutants.Recorder) {
	failed := rec.Status >= 500
	switch {
	case g.s.Bug == "owntxn" || !failed:
		tx.Commit()
	default:
		tx.Rollback()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if failed && g.s.Bug != "stored5xx" {
		if g.s.Bug != "nottl" {
			delete(g.keys, id)
		}
		return
	}
	g.keys[id] = &entry{state: done, fp: fp, status: rec.Status, ctype: rec.Header().Get("Content-Type"),
		loc: rec.Header().Get("Location"), body: append([]byte(nil), rec.Body.Bytes()...)}
}

// refusal is an error answer before the vocabulary words it.
type refusal struct {
	status     int
	what, msg  string
	retryAfter int
}

// Vocab is how a server words its refusals, and the key rule its spec declares.
type Vocab string

// The vocabularies, each with its spec in this folder (Vocab + ".yaml").
const (
	Problem Vocab = "problem" // RFC 9457, type about:blank; keys 16-255 matching ^[!-~]+$
	Plain   Vocab = "plain"   // {"message": ..., "code": ...} as application/json
	Stripe  Vocab = "stripe"  // Stripe's envelope; a reused key is 400 idempotency_error
	ACP     Vocab = "acp"     // ACP's flat error object; opaque keys per endpoint path, echoed
	IETF    Vocab = "ietf"    // the IETF draft: sf-string keys, RFC 9457 about:blank problems
)

// Vocabs are every vocabulary.
var Vocabs = []Vocab{Problem, Plain, Stripe, ACP, IETF}

func (v Vocab) keyRule() keyRule {
	switch v {
	case Problem:
		return keyRule{min: 16, max: 255, pattern: regexp.MustCompile(`^[!-~]+$`)}
	case Stripe:
		return keyRule{min: 1, max: 255, pattern: regexp.MustCompile(`^[!-~]+$`)}
	case ACP:
		return keyRule{min: 1, max: 255, opaque: true}
	case IETF:
		return keyRule{min: 1, max: 255, quoted: true}
	}
	return keyRule{min: 16, max: 255, pattern: regexp.MustCompile(`^[!-+\--~]+$`)} // no comma
}

func (v Vocab) keyMissing() refusal {
	r := refusal{status: 400, what: "key_missing", msg: "an Idempotency-Key header is required"}
	if v == ACP {
		r.what = "idempotency_key_required"
	}
	return r
}

func (v Vocab) keyInvalid() refusal {
	r := refusal{status: 400, what: "key_invalid", msg: "the Idempotency-Key header is malformed"}
	if v == ACP {
		r.what = "idempotency_key_required"
	}
	return r
}

func (v Vocab) mismatch() refusal {
	switch v {
	case Stripe:
		return refusal{status: 400, what: "idempotency_error", msg: "Keys for idempotent requests can only be used with the same parameters they were first used with."}
	case ACP:
		return refusal{status: 422, what: "idempotency_conflict", msg: "Idempotency-Key has already been used with a different request body"}
	}
	return refusal{status: 422, what: "key_reused", msg: "this key was used with another request"}
}

func (v Vocab) inFlight() refusal {
	r := refusal{status: 409, what: "in_progress", msg: "a request with this key is in progress", retryAfter: 1}
	switch v {
	case Stripe:
		r.what = "idempotency_key_in_use"
	case ACP:
		r.what = "idempotency_in_flight"
	}
	return r
}

// refuse writes a refusal in the vocabulary.
func (v Vocab) refuse(w http.ResponseWriter, r refusal) {
	h := w.Header()
	if r.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(r.retryAfter))
	}
	var body any
	switch v {
	case Problem, IETF:
		h.Set("Content-Type", "application/problem+json")
		body = map[string]any{"type": "about:blank", "title": http.StatusText(r.status), "status": r.status, "detail": r.msg}
	case Plain:
		h.Set("Content-Type", "application/json")
		body = map[string]any{"message": r.msg, "code": r.what}
	case Stripe:
		h.Set("Content-Type", "application/json")
		e := map[string]any{"type": "invalid_request_error", "message": r.msg}
		switch r.what {
		case "idempotency_error":
			e["type"] = "idempotency_error"
		case "idempotency_key_in_use":
			e["code"] = "idempotency_key_in_use"
		case "key_missing", "key_invalid":
			e["param"] = "Idempotency-Key"
		}
		body = map[string]any{"error": e}
	case ACP:
		h.Set("Content-Type", "application/json")
		body = map[string]any{"type": "invalid_request", "code": r.what, "message": r.msg}
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(r.status)
	w.Write(b)
}
