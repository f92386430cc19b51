package mutants

import "strconv"

// expiresAsSeconds says how long the key lives instead of until when: the stored answer's
// Idempotency-Key-Expires is the retention in seconds ("86400"), which a client reading an HTTP
// date cannot use (and reads as already past).
func expiresAsSeconds(l *Layer) {
	finish := l.Finish
	l.Finish = func(scope, fp string, tx *Tx, resp *Recorder) {
		finish(scope, fp, tx, resp)
		if resp.Status < 500 {
			resp.header.Set(ExpiresHeader, strconv.Itoa(int(Retention.Seconds())))
		}
	}
}
