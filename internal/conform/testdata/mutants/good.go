package mutants

import (
	"net/http"
)

// Layer is an idempotency layer as a team writes one, step by step. Good returns the steps
// done right; each mutant replaces one step with a classic bug.
type Layer struct {
	k *Kit
	// Scope is the record's key: the tenant and the idempotency key.
	Scope func(r *http.Request, key string) string
	// Fingerprint identifies the request: path and canonical body; an error refuses it (400).
	Fingerprint func(path string, body []byte) (string, error)
	// Claim takes the key for this request (mine), or returns the record that holds it.
	Claim func(scope, fp string) (rec *Record, mine bool)
	// Replay answers with a completed record; InFlight answers while the holder still runs.
	Replay   func(w http.ResponseWriter, rec *Record)
	InFlight func(w http.ResponseWriter)
	// Finish ends the claim after the handler: commit its effects with the stored response,
	// or roll back and free the key after a server error.
	Finish func(scope, fp string, tx *Tx, resp *Recorder)
}

// Good is the layer without bugs.
func Good(k *Kit) *Layer {
	l := &Layer{k: k}
	l.Scope = func(r *http.Request, key string) string { return Tenant(r) + "\x00" + key }
	l.Fingerprint = func(path string, body []byte) (string, error) { return Canonical(path, body, true) }
	l.Claim = func(scope, fp string) (*Record, bool) { return k.PutIfAbsent(scope, &Record{Fingerprint: fp}) }
	l.Replay = Replay
	l.InFlight = func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		Problem(w, http.StatusConflict, "in-flight")
	}
	l.Finish = func(scope, fp string, tx *Tx, resp *Recorder) {
		if resp.Status >= 500 {
			tx.Rollback()
			k.Delete(scope)
			return
		}
		tx.Commit()
		k.Put(scope, resp.Record(fp))
	}
	return l
}

// Wrap guards next with the layer.
func (l *Layer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Tenant(r) == "" {
			Problem(w, http.StatusUnauthorized, "unauthenticated")
			return
		}
		key, status, problem := KeyProblem(r)
		if status != 0 {
			Problem(w, status, problem)
			return
		}
		fp, err := l.Fingerprint(r.URL.Path, ReadBody(r))
		if err != nil {
			Problem(w, http.StatusBadRequest, "body-invalid")
			return
		}
		scope := l.Scope(r, key)
		rec, mine := l.Claim(scope, fp)
		if !mine {
			switch {
			case rec.Fingerprint != fp:
				Problem(w, http.StatusUnprocessableEntity, "payload-mismatch")
			case rec.Done:
				l.Replay(w, rec)
			default:
				l.InFlight(w)
			}
			return
		}
		tx, r := l.k.Begin(r)
		resp := NewRecorder()
		next.ServeHTTP(resp, r)
		l.Finish(scope, fp, tx, resp)
		Send(w, resp)
	})
}

// All is the corpus: the good layer first, then one mutant per classic bug.
func All() []Mutant {
	layer := func(change func(*Layer)) func(*Kit) func(http.Handler) http.Handler {
		return func(k *Kit) func(http.Handler) http.Handler {
			l := Good(k)
			change(l)
			return l.Wrap
		}
	}
	return []Mutant{
		{Name: "good", Bug: "none", Layer: layer(func(*Layer) {})},
		{Name: "race", Bug: "check-then-set: the key is looked up, and stored only after the handler ran", Caught: "concurrent-duplicates", Layer: layer(checkThenSet)},
		{Name: "rawfp", Bug: "the fingerprint is a hash of the raw body bytes", Caught: "equivalent-spellings", Layer: layer(rawBytes)},
		{Name: "nofp", Bug: "no fingerprint: any request under a known key replays its answer", Caught: "mismatch", Layer: layer(noFingerprint)},
		{Name: "stored5xx", Bug: "a 5xx is stored and replayed like any answer", Caught: "5xx-not-stored", Layer: layer(stores5xx)},
		{Name: "processing200", Bug: "a duplicate that meets the first in progress gets 200 {\"status\":\"processing\"}", Caught: "concurrent-duplicates", Layer: layer(processing200)},
		{Name: "notenant", Bug: "records are keyed by the idempotency key alone, not by tenant", Caught: "tenant-isolation", Layer: layer(noTenant)},
		{Name: "nottl", Bug: "a lock without expiry: a request that fails with a 5xx never releases its key", Caught: "5xx-releases-key", Layer: layer(lockWithoutTTL)},
		{Name: "owntxn", Bug: "the handler's writes commit in their own transaction, before the record completes", Caught: "5xx-rolls-back", Layer: layer(ownTransaction)},
		{Name: "replaystatus", Bug: "a replay sends the stored body as 200, without the stored status or Content-Type", Caught: "replay", Layer: layer(replayBodyOnly)},
		{Name: "router404", Bug: "the layer wraps the whole router, so a router's 404 is stored under the key", Caught: "unrouted-not-stored", Layer: layer(func(*Layer) {}), Outside: true},
		{Name: "decoderdiff", Bug: "the fingerprint keeps the first of a member named twice, the handler's decoder the last", Caught: "duplicate-members", Layer: layer(firstMemberWins)},
		{Name: "expiresttl", Bug: "Idempotency-Key-Expires holds the retention in seconds, not the date the key expires", Caught: "first-request", Layer: layer(expiresAsSeconds)},
		{Name: "noretryafter", Bug: "the 409 for a key in flight has no Retry-After", Caught: "concurrent-duplicates", Layer: layer(conflictWithoutRetryAfter)},
	}
}
