// Package conformance is the service the request-sequence cases (testdata/cases) run against:
// the API of testdata/specs/conformance.yaml, built the way a user builds theirs, with the
// code idemgen generates for that spec (golden/conformance, imported as api: the golden suite
// regenerates it with `go test ./generator -update` and fails when it is stale, so the service
// always runs what idemgen produces today), real handlers that write
// one row per business effect to their own PostgreSQL tables, and the test knobs, the effects
// endpoint and the fake payment provider that testdata/cases/README.md describes. It runs on
// the idempotency store it is given (Config.Store: pgstore, or a Redis store in front of it)
// and keeps no record of its own.
//
// It lives with the tests and is not part of idemgen's public packages.
package conformance
