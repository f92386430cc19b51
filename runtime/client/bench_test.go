package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRoundTrip measures the Transport's cost on a successful first attempt (key, body
// buffering, request clone) against the bare base transport, in the same run, over loopback.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	body := strings.Repeat(`{"amount":100,"currency":"EUR"}`, 32) // ~1 KiB
	run := func(b *testing.B, rt http.RoundTripper) {
		for b.Loop() {
			// A reader without GetBody, so the Transport has to buffer it.
			req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader(body)))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	base := srv.Client().Transport
	b.Run("base", func(b *testing.B) { run(b, base) })
	b.Run("client", func(b *testing.B) { run(b, New(base)) })
}
