package main

import (
	"net"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// TestCases runs every request-sequence case (testdata/cases and the conformance service's own)
// against this fiber service on a real PostgreSQL, over fasthttp: all of them apply.
func TestCases(t *testing.T) {
	conformancetest.RunListening(t, "../..", listen, nil)
}

// TestNewcomer: a client whose attempts (1 s) are shorter than the handler (2 s) succeeds, with
// one payment: the operation its first attempt started finishes after it disconnected
// (conformancetest.Newcomer, issue 39).
func TestNewcomer(t *testing.T) {
	conformancetest.NewcomerListening(t, listen)
}

// TestConform runs idemgen conform against this service, as a user would against theirs:
// every check of conformance.yaml's operations passes, faults included.
func TestConform(t *testing.T) {
	conformancetest.ConformListening(t, "../..", listen)
}

// listen serves NewServer on env's database, store, provider and logger with fiber's own
// server (fasthttp) on a loopback port.
func listen(t testing.TB, env conformancetest.Env) (string, error) {
	app, err := NewServer(env.DB, env.Store, env.Provider, env.Logger)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) }) // keep-alive connections would hold Shutdown
	return "http://" + ln.Addr().String(), nil
}
