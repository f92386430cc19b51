// Package layering holds the test that keeps the import rules of docs/architecture.md ("Packages
// and what each may import") true of the code; it has no API.
package layering
