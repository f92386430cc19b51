package idemecho

import "net/http"

// sealed is the writer of a response that has been sent and stored: every later write is
// dropped, so the client gets exactly what a replay of the key gets.
type sealed struct{ w http.ResponseWriter }

func (s sealed) Header() http.Header         { return s.w.Header() }
func (s sealed) WriteHeader(int)             {}
func (s sealed) Write(b []byte) (int, error) { return len(b), nil }
func (s sealed) Unwrap() http.ResponseWriter { return s.w }
