package idemgin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

const unwritten = -1

var errBuffered = errors.New("idemgin: the response of a marked operation is buffered until it is stored; it cannot be hijacked")

// writer is the gin.ResponseWriter of a guarded handler chain, over the guard's recorder. It
// keeps gin's semantics (WriteHeader sets the status, the first write or WriteHeaderNow sends
// it) and knows whether the chain answered: a status set with WriteHeader counts, as gin sends
// it at the end of the chain.
type writer struct {
	http.ResponseWriter
	status   int
	size     int
	explicit bool // WriteHeader was called
}

var _ gin.ResponseWriter = (*writer)(nil)

func (w *writer) answered() bool { return w.explicit || w.Written() }

func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status, w.explicit = code, true
	}
}

func (w *writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.ResponseWriter, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int   { return w.status }
func (w *writer) Size() int     { return w.size }
func (w *writer) Written() bool { return w.size != unwritten }

// Flush sends nothing: the response is kept until the outcome is known.
func (w *writer) Flush() { w.WriteHeaderNow() }

func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errBuffered }

// CloseNotify returns a channel that never fires: the handler's response goes to a buffer,
// not to the connection (the request's context ends when the client goes away).
func (w *writer) CloseNotify() <-chan bool { return make(chan bool) }

func (w *writer) Pusher() http.Pusher { return nil }

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sealed is the writer of a response that has been sent and stored: every later write is
// dropped, so the client gets exactly what a replay of the key gets.
type sealed struct{ gin.ResponseWriter }

func (s sealed) WriteHeader(int)                   {}
func (s sealed) WriteHeaderNow()                   {}
func (s sealed) Write(b []byte) (int, error)       { return len(b), nil }
func (s sealed) WriteString(v string) (int, error) { return len(v), nil }
func (s sealed) Flush()                            {}
func (s sealed) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errBuffered
}
