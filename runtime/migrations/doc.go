// Package migrations holds the idempotency store's schema as plain SQL files.
//
// The files in this folder follow golang-migrate's naming (NNNN_name.up.sql and .down.sql); the
// goose/ folder holds the same statements with goose's annotations. runtime.Migrate applies the
// up files itself, and runtime.SchemaSQL returns them for `idemgen sql`.
package migrations

import "embed"

// FS holds every migration file of this folder (not the goose/ copies).
//
//go:embed *.sql
var FS embed.FS
