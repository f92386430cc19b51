package mutants

// firstMemberWins fingerprints a body whose member is named twice by its first value, while
// the handler's encoding/json takes the last: {"amount":100,"amount":900000} charges 900000
// and the key remembers 100, so a retry asking for 100 replays the charge of 900000.
func firstMemberWins(l *Layer) {
	l.Fingerprint = func(path string, body []byte) (string, error) { return Canonical(path, body, false) }
}
