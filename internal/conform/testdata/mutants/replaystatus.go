package mutants

import "net/http"

// replayBodyOnly keeps only the body: a replay of a 201 comes back as 200 without its
// Content-Type or Location.
func replayBodyOnly(l *Layer) {
	l.Replay = func(w http.ResponseWriter, rec *Record) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write(rec.Body)
	}
}
