package mutants

import (
	"net/http"
)

// processing200 answers a duplicate of a request still running with 200 and a status body,
// so a client that sent a retry takes it for the payment's answer.
func processing200(l *Layer) {
	l.InFlight = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"status":"processing"}`))
	}
}
