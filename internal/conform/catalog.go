package conform

// Check names one check of the contract. Each operation is checked with every one that applies
// to it; a report names checks by these identifiers (docs/conform.md lists them).
type Check string

// The checks, in the order a run makes them for each operation.
const (
	CheckFirstRequest    Check = "first-request"
	CheckReplay          Check = "replay"
	CheckEquivalent      Check = "equivalent-spellings"
	CheckExcluded        Check = "excluded-fields"
	CheckMismatch        Check = "mismatch"
	CheckDuplicateMember Check = "duplicate-members"
	CheckKeyMissing      Check = "key-missing"
	CheckKeyMalformed    Check = "key-malformed"
	CheckKeyReuse        Check = "key-other-operation"
	CheckUnrouted        Check = "unrouted-not-stored"
	CheckConcurrent      Check = "concurrent-duplicates"
	Check5xxNotStored    Check = "5xx-not-stored"
	Check5xxReleases     Check = "5xx-releases-key"
	Check5xxRollsBack    Check = "5xx-rolls-back"
	CheckTenants         Check = "tenant-isolation"
	CheckLostResponse    Check = "faults/lost-response"
	CheckLateDuplicate   Check = "faults/late-duplicate"
	CheckTwoConnections  Check = "faults/two-connections"
	CheckStorm           Check = "faults/retry-storm"
	CheckCase            Check = "case"
)

// CheckInfo describes a check for reports, --help and docs.
type CheckInfo struct {
	Check Check
	// Holds is what must hold, in one sentence.
	Holds string
	// Needs is what the check needs beyond a spec and a base URL ("" for nothing).
	Needs string
}

// Catalog lists every check with what it proves and needs, in run order.
func Catalog() []CheckInfo {
	return []CheckInfo{
		{CheckFirstRequest, "a valid request with a fresh key executes: a final answer (not 5xx), not marked as a replay, with a valid Idempotency-Key-Expires where the spec declares it", ""},
		{CheckReplay, "the same request again replays: same status, body bytes and allow-listed headers, Idempotent-Replayed: true, nothing runs", ""},
		{CheckEquivalent, "the same request spelt otherwise (members reordered, other whitespace, number spellings, string escapes; form fields reordered, percent-encoded) replays", "a JSON or form body"},
		{CheckExcluded, "a change of a field the fingerprint excludes (fingerprint.exclude, x-idempotency-ignore) replays", "an excluded field"},
		{CheckMismatch, "a changed field under the same key is a mismatch (422, or the profile's answer), runs nothing, and the first response still replays", "a field to change"},
		{CheckDuplicateMember, "a body that names a member twice is refused, or the value the handler used is the one the fingerprint recorded (no decoder differential)", "a JSON body"},
		{CheckKeyMissing, "a request without its required key is 400 and runs nothing", "a required key"},
		{CheckKeyMalformed, "keys too short, too long, with forbidden characters, against the pattern, or sent twice are 400 and run nothing", ""},
		{CheckKeyReuse, "a key reused on another operation is a mismatch (keys name one request per tenant; scope: operation or path keeps them apart)", "a second operation"},
		{CheckUnrouted, "a request the router does not route (404) leaves no record under its key", ""},
		{CheckConcurrent, "N copies sent at once execute once: every 2xx carries the same resource, the others are 409 with Retry-After or wait and replay", ""},
		{Check5xxNotStored, "after a 5xx the same request executes again: a server error is never replayed", "--fail-header"},
		{Check5xxReleases, "after a 5xx the key is free at once: the retry is not held in flight", "--fail-header"},
		{Check5xxRollsBack, "a 5xx leaves no effect (atomic mode) and its retry leaves exactly one execution's", "--fail-header and --effects-cmd"},
		{CheckTenants, "the same key under another tenant is another request: it executes, and another body is no mismatch", "--tenant-header"},
		{CheckLostResponse, "the server executes, the connection is reset before the answer: the retry replays that execution", "--faults"},
		{CheckLateDuplicate, "a copy delayed on its way arrives after the retry executed: it replays", "--faults"},
		{CheckTwoConnections, "the same request sent on two connections at once executes once", "--faults"},
		{CheckStorm, "clients retrying through resets, delays and duplicated deliveries: every key's history is linearizable against the contract's model, and executions equal confirmed calls", "--faults (effects with --effects-cmd)"},
		{CheckCase, "a hand-written request sequence (--cases) behaves as written", "--cases"},
	}
}

// info returns the catalog entry of c.
func info(c Check) CheckInfo {
	for _, i := range Catalog() {
		if i.Check == c {
			return i
		}
	}
	return CheckInfo{Check: c}
}
