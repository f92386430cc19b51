package client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// replayBody produces the same request body for every attempt of an operation.
type replayBody struct {
	// get returns a fresh reader of the body; nil when the request has no body.
	get func() (io.ReadCloser, error)
	// length is the Content-Length to send (-1: unknown, chunked).
	length int64
}

// newReplayBody takes over req's body: it uses req.GetBody when set (no copy, no cap), else reads
// the body once into memory, refusing with ErrBodyTooLarge above maxBytes. Either way it closes
// req.Body, as the RoundTripper contract requires.
func newReplayBody(req *http.Request, maxBytes int64) (*replayBody, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return &replayBody{length: 0}, nil
	}
	defer req.Body.Close()
	if req.GetBody != nil {
		return &replayBody{get: req.GetBody, length: req.ContentLength}, nil
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("client: read request body: %w", err)
	}
	if int64(len(buf)) > maxBytes {
		return nil, fmt.Errorf("client: request body over %d bytes and no GetBody: %w", maxBytes, ErrBodyTooLarge)
	}
	get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return &replayBody{get: get, length: int64(len(buf))}, nil
}

// attach gives r a fresh copy of the body, and GetBody so that net/http's own connection-level
// retry can replay it too.
func (b *replayBody) attach(r *http.Request) error {
	if b.get == nil {
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
		return nil
	}
	body, err := b.get()
	if err != nil {
		return fmt.Errorf("client: GetBody: %w", err)
	}
	r.Body, r.GetBody, r.ContentLength = body, b.get, b.length
	return nil
}
