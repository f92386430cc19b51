// Package faults is idemgen's fault-injection suite: it attacks a running service built on the
// runtime and pgstore (two replica processes, a real PostgreSQL, a fake payment provider over
// HTTP) with a matrix of faults — same-key storms across replicas, SIGKILL mid-handler,
// PostgreSQL stopped and frozen under load, lease expiry races, slow bodies — records every
// attempt a client made (request, answer, timings), and checks that history two ways:
//
//   - against the ground truth of the effects (business rows, provider calls): per key at most
//     one execution, every execution seen by a client (no lost response), every success and
//     replay carrying that execution's response, and 503 details that tell the truth;
//   - for linearizability against a model of the contract (internal/history), with porcupine.
//
// This file set holds what the scenarios share and what can be tested without a database: the
// audit, the clients and the service the replicas run. The scenarios are the package's
// tests; README.md says how to run them and shows the last long run's figures.
package faults
