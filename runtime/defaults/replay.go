package defaults

import "net/textproto"

// Replay headers (docs/design.md section 5): what marks a replayed answer, which response headers a
// replay repeats, and which it never does. The runtime stores and replays by them, `idemgen
// spec` declares them and `idemgen conform` judges replays by them.
const (
	// HeaderReplayed marks every replayed answer: `Idempotent-Replayed: true` (Stripe's marker,
	// which ACP adopted).
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderReplayBody is `omitted` on a replay whose body was above limits.response when it
	// was first sent, so it was not stored.
	HeaderReplayBody = "Idempotent-Replay-Body"
	// KeyExpiresHeader is the response header on every stored answer and every replay that says,
	// as an HTTP date (RFC 9110 section 5.6.7, IMF-fixdate), until when a retry with the same key
	// gets this answer back: the end of the record's retention, by the store's clock, rounded down
	// to the second. After it a retry meets the key's tombstone (410 result-expired) until the
	// tombstone ends, then runs as a new request. draft-ietf-httpapi-idempotency-key-header-07
	// (section 2.3) asks servers to publish their expiry policy and defines no header for it; its
	// open issues #35 and #49 and the Agentic Commerce Protocol's #97 ask for one, in these forms.
	KeyExpiresHeader = "Idempotency-Key-Expires"
)

// replayHeaders is ReplayHeaders' table; it is never written.
var replayHeaders = [...]string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Location", "Etag", "Link",
}

// ReplayHeaders returns the response headers stored and replayed for every operation, in
// canonical MIME form: the representation's metadata (RFC 9110 section 8) and the headers
// that name what was made (Location, ETag, Link). An operation's replay.headers and its
// profile add to them. Each call returns a new slice.
func ReplayHeaders() []string {
	t := replayHeaders
	return t[:]
}

// neverStored is NeverStored's set, by canonical MIME name.
var neverStored = map[string]bool{
	"Set-Cookie": true, "Authorization": true, "Proxy-Authorization": true, "Date": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Proxy-Authenticate": true, "Www-Authenticate": true,
	HeaderReplayed: true, HeaderReplayBody: true, KeyExpiresHeader: true,
}

// NeverStored reports whether the response header name (any case) is one no record stores and
// no replay repeats, even when an operation lists it in replay.headers: credentials and their
// challenges, the per-response Date, the hop-by-hop headers of RFC 9110 section 7.6.1 and
// Content-Length (the replay's own), the replay markers themselves and the key's expiry (each
// answer's own).
func NeverStored(name string) bool {
	return neverStored[textproto.CanonicalMIMEHeaderKey(name)]
}
