// Package load benchmarks idemgen's loader on the largest public spec in the corpus
// (testdata/specs/vendor/stripe-spec3.yaml: 4.1 MB, 468 operations) with every POST marked
// through a config file, against a bare kin-openapi load of the same file in the same run.
// Results and commands: RESULTS.md.
//
// It imports kin-openapi only to measure the baseline; product code reaches kin-openapi through
// internal/spec alone.
package load
