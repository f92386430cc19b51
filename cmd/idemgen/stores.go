package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// storeKind is one idempotency store the command line knows: how generated code names its
// database handle, the schema it needs, and how records, reconcile and the like reach it.
type storeKind struct {
	// pkg is the store's package, as messages name it.
	pkg string
	// handle is the generator's --db type reference (the config file's db) of the handlers
	// that write through this store; "" for a store that has no handle of its own (redisstore:
	// generated code writes through the database store it is paired with or caches).
	handle string
	// schema returns the SQL that creates the store's tables; nil when the store has none.
	schema func() ([]byte, error)
	// schemes are the --dsn URL schemes that name the store (lowercase, without "://").
	schemes []string
	// open connects to the store that dsn names; nil when no other process can (memstore).
	// The caller calls closeFn. Errors never quote dsn.
	open func(ctx context.Context, dsn string, o openOptions) (st store.Store, closeFn func(), err error)
	// why says why open is nil, for the error that refuses the store.
	why string
}

// openOptions size the connection an opener makes.
type openOptions struct {
	// maxConns is the most connections in use at once (the PostgreSQL pool's size); 0: 2.
	maxConns int32
}

// stores are the stores the command line knows, the default (runtime/pgstore, whose handle is
// generator.DefaultDB) first.
var stores = []storeKind{
	{
		pkg:     "runtime/pgstore",
		handle:  generator.DefaultDB,
		schema:  generator.SQL,
		schemes: []string{"postgres", "postgresql"},
		open:    openPostgres,
	},
	{
		pkg:     "runtime/redisstore",
		schemes: []string{"redis", "rediss"},
		open:    openRedis,
	},
	{
		pkg:     "runtime/store/memstore",
		handle:  "*github.com/idemgen/idemgen/runtime/store/memstore.DB",
		schemes: []string{"mem", "memstore"},
		why:     "memstore keeps its records in the memory of the process that serves them: no other process can read them",
	},
}

// storeByHandle is the store whose generated handlers write through handle; ok is false for a
// handle the table does not list (a store of the user's own).
func storeByHandle(handle string) (storeKind, bool) {
	for _, s := range stores {
		if s.handle != "" && s.handle == handle {
			return s, true
		}
	}
	return storeKind{}, false
}

// schemaOf is the SQL schema of the store whose handle names, located at where (the flag,
// "--db", or the config file's line, "idemgen.yaml:4:5: db") in its errors.
func schemaOf(handle, where string) ([]byte, error) {
	s, ok := storeByHandle(handle)
	switch {
	case !ok:
		return nil, errorf("%s %s names no store idemgen knows (%s): a store of your own ships its own schema", where, handle, knownHandles())
	case s.schema == nil:
		return nil, errorf("%s %s is the handle of %s, which has no SQL schema to write", where, handle, s.pkg)
	}
	return s.schema()
}

func knownHandles() string {
	var hs []string
	for _, s := range stores {
		if s.handle != "" {
			hs = append(hs, s.handle)
		}
	}
	return strings.Join(hs, ", ")
}

// effectiveDB is the handle generated code writes through and where it was named: --db, else
// the config file's db (located at its line), else generator.DefaultDB (located at --db, whose
// default it is).
func effectiveDB(flag, config string, configLoc diag.Loc) (handle, where string) {
	switch {
	case flag != "":
		return flag, "--db"
	case config != "":
		return config, configLoc.String() + ": db"
	default:
		return generator.DefaultDB, "--db"
	}
}

// dsnScheme is the URL scheme of dsn, lowercase; "" when dsn is not a URL (a PostgreSQL
// key=value string, "host=db dbname=payments", which pgx also reads). Only a scheme as RFC 3986
// section 3.1 spells it counts (a letter, then letters, digits, '+', '-', '.'), so that a
// key=value string whose password holds "://" is never taken, and printed, as a scheme.
func dsnScheme(dsn string) string {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || scheme == "" {
		return ""
	}
	for i, c := range scheme {
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(scheme)
}

// storeByDSN is the store that dsn's scheme names; errors (usage errors) name --dsn and the
// scheme, never the rest of dsn, which may hold a password.
func storeByDSN(dsn string) (storeKind, error) {
	scheme := dsnScheme(dsn)
	if scheme == "" {
		return stores[0], nil // key=value: PostgreSQL's form
	}
	var known []string
	for _, s := range stores {
		if slices.Contains(s.schemes, scheme) {
			if s.open == nil {
				return s, &exitError{code: exitUsage, err: errorf("--dsn %s://: %s", scheme, s.why)}
			}
			return s, nil
		}
		if s.open != nil {
			for _, sc := range s.schemes {
				known = append(known, sc+"://")
			}
		}
	}
	return storeKind{}, &exitError{code: exitUsage, err: errorf("--dsn %s:// names no store idemgen can open (%s, or a PostgreSQL key=value string)", scheme, strings.Join(known, ", "))}
}

// openStore opens the store that dsn names and checks that it has the capability C (a
// store.Inspector for records, a store.Reconcilable for reconcile; capability names it in
// errors). It returns the store both as itself and as C; the caller calls closeFn. Errors are
// *exitError: exitUsage for a DSN that names no store that can be read this way, exitStore when
// the store cannot be reached.
func openStore[C any](ctx context.Context, dsn string, o openOptions, capability string) (st store.Store, c C, closeFn func(), err error) {
	kind, err := storeByDSN(dsn)
	if err != nil {
		return nil, c, nil, err
	}
	st, closeFn, err = kind.open(ctx, dsn, o)
	if err != nil {
		return nil, c, nil, err
	}
	c, ok := st.(C)
	if !ok {
		closeFn()
		return nil, c, nil, &exitError{code: exitUsage, err: errorf("--dsn %s:// names %s, which does not implement %s", dsnScheme(dsn), kind.pkg, capability)}
	}
	return st, c, closeFn, nil
}

// resolveDSN is --dsn, else $IDEMGEN_DSN, else $DATABASE_URL.
func resolveDSN(flag, cmdName string) (string, error) {
	dsn := flag
	for _, env := range []string{"IDEMGEN_DSN", "DATABASE_URL"} {
		if dsn == "" {
			dsn = os.Getenv(env)
		}
	}
	if dsn == "" {
		return "", &exitError{code: exitUsage, err: errorf("%s needs --dsn (or $IDEMGEN_DSN or $DATABASE_URL)", cmdName)}
	}
	return dsn, nil
}

// openPostgres opens runtime/pgstore on a pgx pool of o.maxConns connections (at least 2).
func openPostgres(ctx context.Context, dsn string, o openOptions) (store.Store, func(), error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included: say only what is wrong.
		return nil, nil, &exitError{code: exitUsage, err: errorf("--dsn is not a PostgreSQL connection string or URL")}
	}
	cfg.MaxConns = max(o.maxConns, 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, &exitError{code: exitStore, err: fmt.Errorf("connect: %w", err)}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, &exitError{code: exitStore, err: fmt.Errorf("connect: %w", err)}
	}
	return pgstore.New(pool, pgstore.Options{}), pool.Close, nil
}

// openRedis opens runtime/redisstore's lease store (redisstore.New) on a rueidis client. The
// URL is rueidis's (redis://[user:password@]host:port[/db], rediss:// for TLS, addr=host:port
// for more seeds), with one parameter of idemgen's: prefix, the store's Options.Prefix when the
// service sets one (default "idemgen:lease:").
func openRedis(ctx context.Context, dsn string, _ openOptions) (store.Store, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, nil, &exitError{code: exitUsage, err: errorf("--dsn is not a Redis URL (redis://[user:password@]host:port[/db])")}
	}
	q := u.Query()
	opts := redisstore.Options{Prefix: q.Get("prefix")}
	q.Del("prefix")
	u.RawQuery = q.Encode()
	copt, err := rueidis.ParseURL(u.String())
	if err != nil {
		// rueidis's message may quote the URL's path or parameters: say only what is wrong.
		return nil, nil, &exitError{code: exitUsage, err: errorf("--dsn is not a Redis URL (redis://[user:password@]host:port[/db])")}
	}
	if d, ok := ctx.Deadline(); ok && copt.Dialer.Timeout == 0 {
		copt.Dialer.Timeout = max(0, time.Until(d))
	}
	client, err := rueidis.NewClient(copt)
	if err != nil {
		return nil, nil, &exitError{code: exitStore, err: fmt.Errorf("connect: %w", err)}
	}
	st, err := redisstore.New(client, opts)
	if err != nil {
		client.Close()
		if errors.Is(err, redisstore.ErrEvictionPolicy) || errors.Is(err, redisstore.ErrPolicyUnknown) {
			return nil, nil, &exitError{code: exitStore, err: fmt.Errorf("open: %w", err)}
		}
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--dsn: %w", err)}
	}
	return st, client.Close, nil
}

// storeTable lists stores for help texts: each store's package, handle, schema and --dsn
// schemes.
func storeTable() string {
	var b strings.Builder
	for _, s := range stores {
		handle, schema, schemes := s.handle, "none", "none (no other process can read it)"
		if handle == "" {
			handle = "(none of its own)"
		}
		if s.schema != nil {
			schema = "SQL (idemgen sql, generate --sql)"
		}
		if s.open != nil {
			var ss []string
			for _, sc := range s.schemes {
				ss = append(ss, sc+"://")
			}
			schemes = strings.Join(ss, " ")
		}
		fmt.Fprintf(&b, "  %s\n      --db %s\n      schema: %s; --dsn: %s\n", s.pkg, handle, schema, schemes)
	}
	return b.String()
}
