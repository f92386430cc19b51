package mutants

// checkThenSet: the classic race. The layer looks the key up, runs the handler when it finds
// nothing, and stores the record afterwards; two copies that arrive together both find
// nothing and both run.
func checkThenSet(l *Layer) {
	l.Claim = func(scope, fp string) (*Record, bool) {
		if rec := l.k.Get(scope); rec != nil {
			return rec, false
		}
		return &Record{Fingerprint: fp}, true // not stored: Finish stores the response
	}
}
