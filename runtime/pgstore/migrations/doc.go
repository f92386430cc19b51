// Package migrations holds the PostgreSQL idempotency store's schema as plain SQL files, and
// nothing that needs a database driver: the idemgen command prints them (`idemgen sql`)
// without linking pgx.
//
// The files in this folder follow golang-migrate's naming (NNNN_name.up.sql and .down.sql); the
// goose/ folder holds the same statements with goose's annotations. partitioned/ (and
// goose/partitioned/) hold the optional layout partitioned by expiry, the same way. pgstore.Migrate applies the
// up files itself; SchemaSQL returns them for users who manage their schema themselves.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// FS holds every migration file of this folder (not the goose/ copies): the plain table.
//
//go:embed *.sql
var FS embed.FS

// PartitionedFS holds the migrations of the layout partitioned by expiry, under partitioned/
// (pgstore.MigratePartitioned; docs/runtime.md, "Retention by partitions").
//
//go:embed partitioned/*.sql
var PartitionedFS embed.FS

// Migration is one embedded up file, NNNN_name.up.sql.
type Migration struct {
	Version int
	Name    string // the file name
	SQL     string
}

// Up returns the embedded up migrations of the plain table in version order. It fails only if a
// file in FS is misnamed, which the package's tests rule out.
func Up() ([]Migration, error) { return up(FS, ".") }

// UpPartitioned returns the embedded up migrations of the partitioned layout in version order;
// their names start with "partitioned/".
func UpPartitioned() ([]Migration, error) { return up(PartitionedFS, "partitioned") }

func up(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.up.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		num, _, ok := strings.Cut(path.Base(n), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a version number", n)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: n, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// SchemaSQL returns the SQL that creates the idempotency store's tables and indexes (the plain
// table): every up migration in order, each under a comment line naming its file.
func SchemaSQL() string { return schemaSQL(Up()) }

// PartitionedSchemaSQL is SchemaSQL for the layout partitioned by expiry. It creates the
// partitioned table without partitions: pgstore.MigratePartitioned and the PartitionSweeper
// create them.
func PartitionedSchemaSQL() string { return schemaSQL(UpPartitioned()) }

func schemaSQL(ms []Migration, err error) string {
	if err != nil {
		return "-- " + err.Error() + "\n"
	}
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "-- %s\n%s", m.Name, m.SQL)
	}
	return b.String()
}
