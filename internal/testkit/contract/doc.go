// Package contract holds the tests that keep the contract stated once: every row of the
// contract table (runtime/defaults.Profiles) is served by each part that reads it — the loader,
// the generator, the runtime and `idemgen spec` (internal/conform's TestEveryRowJudgesItsRuntime
// covers conform) — and no part outside the table and the runtime's envelope writers restates a
// row's behaviour. A new profile a spec can name is one row (and, for a new error envelope, one
// writer); these tests then cover it without a change.
package contract
