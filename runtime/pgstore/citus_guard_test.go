package pgstore

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// TestStatementsCitusPlans is the guard CI runs for the store on Citus (docs/distributed.md),
// which CI cannot run: every SQL statement the store sends there is analysed by PostgreSQL
// (PREPARE with debug_print_parse, whose query tree names each function and operator by oid),
// and checked against the rules by which Citus 13's planner refuses a modification of a
// distributed table (multi_router_planner.c, TargetlistAndFunctionsSupported):
//
//   - no volatile function in the WHERE of an UPDATE or DELETE, or in an UPDATE's SET list;
//   - no stable function with a column among its arguments there (timestamptz + interval is
//     stable), since Citus evaluates stable functions once, on the coordinator;
//   - no CASE or COALESCE holding a function that is not immutable there, subqueries included;
//   - no function that is not immutable in a RETURNING list;
//   - no ON CONFLICT on columns without scope_id (no unique index of a distributed table has
//     them: name the constraint, whose name the distributed key keeps);
//
// and that no SELECT ... FOR UPDATE spans shards (its WHERE must pin scope_id, the
// distribution column). Subqueries in those clauses are not checked, as Citus does not: they
// are routed with the statement. The statements are the fields of the statements built for
// Citus and every package-level SQL constant and variable, less the few that never run on
// Citus (skipOnCitus, with the reason).
func TestStatementsCitusPlans(t *testing.T) {
	sqls := citusStatements(t)
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var onTree func(string)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if onTree != nil && strings.HasPrefix(n.Message, "parse tree") {
			onTree(n.Detail)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := migrateConn(ctx, url); err != nil {
		t.Fatal(err)
	}
	pc := conn.PgConn()
	for _, s := range []string{"SET client_min_messages = log", "SET debug_print_parse = on", "SET debug_pretty_print = off"} {
		if err := pc.Exec(ctx, s).Close(); err != nil {
			t.Fatal(err)
		}
	}
	var trees []string
	names := make([]string, 0, len(sqls))
	for n := range sqls {
		names = append(names, n)
	}
	sort.Strings(names)
	var failures []string
	for i, name := range names {
		trees = trees[:0]
		onTree = func(tree string) { trees = append(trees, tree) }
		_, err := pc.Prepare(ctx, "citus_guard_"+strconv.Itoa(i), sqls[name], nil)
		onTree = nil
		if err != nil {
			t.Errorf("%s: PREPARE: %v\n%s", name, err, sqls[name])
			continue
		}
		for _, tree := range trees {
			root, err := parseNodes(tree)
			if err != nil {
				t.Fatalf("%s: reading the query tree: %v", name, err)
			}
			for _, why := range citusRefusals(t, conn, root) {
				failures = append(failures, name+": "+why)
			}
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d statements checked", len(names))
}

// migrateConn creates the store's schema in the database at url.
func migrateConn(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return Migrate(ctx, pool)
}

// skipOnCitus are the SQL constants and variables the store never sends on Citus, and why.
var skipOnCitus = map[string]string{
	"sqlSweep":             "the sweeper is portable on Citus (sqlSweepPortable)",
	"sqlSweepCalls":        "the sweeper is portable on Citus (sqlSweepCallsPortable)",
	"sqlSweepTombstones":   "the sweeper is portable on Citus (sqlSweepTombstonesPortable)",
	"sqlStorageBytes":      "sqlStorageBytesCitus measures the shards",
	"sqlStorageBytesCitus": "citus_total_relation_size exists on Citus only",
	"sqlDistributed":       "asked only where the citus extension exists",
	"sqlUnlock":            "the session lock of ClaimWithStatement.LockAtRead is refused on Citus",
	"sqlSetLockTimeout":    "Store.lockWait sets the lock wait with SET LOCAL on Citus",
	// statements fields
	"storageBytes":    "a read of citus_total_relation_size, which exists on Citus only",
	"readLock":        "ClaimWithStatement.LockAtRead is refused on Citus",
	"readLocked":      "ClaimWithStatement.LockAtRead is refused on Citus",
	"readLockCharged": "ClaimWithStatement.LockAtRead is refused on Citus",
	"claimAtomic[0]":  "ClaimPipelined claims as ClaimReadFirst on Citus: claimAtomic runs without advisory locks only",
	"claimedOrStop":   "ClaimPipelined claims as ClaimReadFirst on Citus",
}

// sqlStart is how a complete statement starts (fragments such as recordCols do not).
var sqlStart = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// citusStatements returns every statement the store may send on Citus, by name: the fields of
// newStatements for Citus, and the package's SQL constants and variables (found in its source,
// so that a new one cannot be missed), less skipOnCitus and the partitioned layout's files.
func citusStatements(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	q := reflect.ValueOf(newStatements(false, engine{name: "Citus", citus: true}, time.Second)).Elem()
	for i := range q.NumField() {
		f, name := q.Field(i), q.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			out[name] = f.String()
		case reflect.Array:
			for j := range f.Len() {
				out[fmt.Sprintf("%s[%d]", name, j)] = f.Index(j).String()
			}
		}
	}
	// Package-level variables cannot be read by name: these are all of them, and the source
	// scan below fails on one that is missing here.
	vars := map[string]string{
		"sqlChargeBody":    sqlChargeBody,
		"sqlReserveBody":   sqlReserveBody,
		"sqlReserveClaims": sqlReserveClaims,
		"sqlClaimCounted":  sqlClaimCounted,
		"sqlSweepUsage":    sqlSweepUsage,
		"sqlSweep":         sqlSweep,
		"sqlSweepPortable": sqlSweepPortable,
	}
	consts, stringVars := sourceStrings(t)
	for name, v := range consts {
		out[name] = v
	}
	for _, name := range stringVars {
		v, ok := vars[name]
		if !ok {
			t.Errorf("package variable %s: add it to the guard's variables", name)
			continue
		}
		out[name] = v
	}
	for name := range skipOnCitus {
		if _, ok := out[name]; !ok {
			t.Errorf("skipOnCitus names %s, which is no statement", name)
		}
		delete(out, name)
	}
	for name, sql := range out {
		if !sqlStart.MatchString(sql) {
			delete(out, name)
		}
	}
	return out
}

// sourceStrings evaluates the package's string constants (literals, other constants and +) and
// lists its package-level variables initialised with a string; the partitioned layout's file is
// left out (the layout is refused on Citus).
func sourceStrings(t *testing.T) (consts map[string]string, vars []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]ast.Expr{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "partitions.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if g.Tok == token.CONST {
						decls[n.Name] = vs.Values[i]
						continue
					}
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						if v.Kind == token.STRING {
							vars = append(vars, n.Name)
						}
					case *ast.BinaryExpr, *ast.CallExpr:
						if strings.HasPrefix(n.Name, "sql") {
							vars = append(vars, n.Name)
						}
					}
				}
			}
		}
	}
	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch v := e.(type) {
		case *ast.BasicLit:
			if v.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		case *ast.Ident:
			d, ok := decls[v.Name]
			if !ok {
				return "", false
			}
			return eval(d)
		case *ast.BinaryExpr:
			if v.Op != token.ADD {
				return "", false
			}
			a, ok1 := eval(v.X)
			b, ok2 := eval(v.Y)
			return a + b, ok1 && ok2
		case *ast.ParenExpr:
			return eval(v.X)
		}
		return "", false
	}
	consts = map[string]string{}
	for name, e := range decls {
		if s, ok := eval(e); ok {
			consts[name] = s
		}
	}
	return consts, vars
}

// node is a node of PostgreSQL's query tree as debug_print_parse prints it (outfuncs.c):
// {TYPE :field value ...}; a value is a node, a list "(...)", a byte array "[...]" or a word.
type node struct {
	typ    string
	fields map[string][]any
	items  []any // a list's or byte array's items
}

// parseNodes reads a tree printed by debug_print_parse.
func parseNodes(s string) (*node, error) {
	toks := tokenize(s)
	p := 0
	var item func() (any, error)
	item = func() (any, error) {
		if p >= len(toks) {
			return nil, fmt.Errorf("unexpected end")
		}
		tok := toks[p]
		p++
		switch tok {
		case "{":
			if p >= len(toks) {
				return nil, fmt.Errorf("unexpected end")
			}
			n := &node{typ: toks[p], fields: map[string][]any{}}
			p++
			var field string
			for p < len(toks) && toks[p] != "}" {
				if strings.HasPrefix(toks[p], ":") {
					field = toks[p][1:]
					n.fields[field] = nil
					p++
					continue
				}
				v, err := item()
				if err != nil {
					return nil, err
				}
				n.fields[field] = append(n.fields[field], v)
			}
			p++
			return n, nil
		case "(", "[":
			end := map[string]string{"(": ")", "[": "]"}[tok]
			n := &node{typ: tok}
			for p < len(toks) && toks[p] != end {
				v, err := item()
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
			p++
			return n, nil
		}
		return tok, nil
	}
	v, err := item()
	if err != nil {
		return nil, err
	}
	n, ok := v.(*node)
	if !ok {
		return nil, fmt.Errorf("not a node: %v", v)
	}
	return n, nil
}

// tokenize splits a printed tree into braces, parentheses, brackets, quoted strings and words.
func tokenize(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case strings.IndexByte("{}()[]", c) >= 0:
			out = append(out, string(c))
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, s[i:min(j+1, len(s))])
			i = j + 1
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \n\t\r{}()[]", s[j]) < 0 {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, s[i:min(j, len(s))])
			i = j
		}
	}
	return out
}

func (n *node) field(name string) any {
	if v := n.fields[name]; len(v) > 0 {
		return v[0]
	}
	return nil
}

func (n *node) child(name string) *node {
	c, _ := n.field(name).(*node)
	return c
}

func (n *node) word(name string) string {
	w, _ := n.field(name).(string)
	return w
}

// children returns every node directly under n: its fields' values and its items.
func (n *node) children() []*node {
	var out []*node
	add := func(vs []any) {
		for _, v := range vs {
			if c, ok := v.(*node); ok {
				out = append(out, c)
			}
		}
	}
	keys := make([]string, 0, len(n.fields))
	for k := range n.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(n.fields[k])
	}
	add(n.items)
	return out
}

// volatility reads pg_proc's provolatile of every function the trees name, cached.
type volatility struct {
	conn *pgx.Conn
	t    *testing.T
	of   map[string]byte
}

// funcsOf returns the oids of the functions node n itself calls (PostgreSQL's
// check_functions_in_node), and whether it is an SQL value function (CURRENT_TIMESTAMP ...,
// stable).
func funcsOf(n *node) (oids []string, sqlValue bool) {
	switch n.typ {
	case "FUNCEXPR":
		return []string{n.word("funcid")}, false
	case "OPEXPR", "DISTINCTEXPR", "NULLIFEXPR", "SCALARARRAYOPEXPR":
		return []string{n.word("opfuncid")}, false
	case "SQLVALUEFUNCTION":
		return nil, true
	}
	return nil, false
}

// class is the volatility of what n itself calls: 'i', 's' or 'v'.
func (v *volatility) class(n *node) byte {
	oids, sqlValue := funcsOf(n)
	out := byte('i')
	if sqlValue {
		out = 's'
	}
	for _, oid := range oids {
		c, ok := v.of[oid]
		if !ok {
			var s string
			if err := v.conn.QueryRow(context.Background(), "SELECT provolatile::text FROM pg_proc WHERE oid = $1::oid", oid).Scan(&s); err != nil {
				v.t.Fatalf("volatility of function %s: %v", oid, err)
			}
			c = s[0]
			v.of[oid] = c
		}
		if c == 'v' || (c == 's' && out == 'i') {
			out = c
		}
	}
	return out
}

// find reports whether n or a node under it (into subqueries when deep) matches.
func find(n *node, deep bool, match func(*node) bool) bool {
	if n == nil {
		return false
	}
	if n.typ == "QUERY" && !deep {
		return false
	}
	if match(n) {
		return true
	}
	for _, c := range n.children() {
		if find(c, deep, match) {
			return true
		}
	}
	return false
}

// irreducible is Citus's MasterIrreducibleExpression: whether n passes a column to a stable
// function (varArg), or holds a CASE or COALESCE around a function that is not immutable
// (badCase). It does not enter subqueries; the CASE check does.
func (v *volatility) irreducible(n *node, varArg, badCase *bool) (containsVar bool) {
	if n == nil || n.typ == "QUERY" {
		return false
	}
	switch n.typ {
	case "CASEEXPR", "COALESCEEXPR":
		if find(n, true, func(c *node) bool { return v.class(c) != 'i' }) {
			*badCase = true
		}
		return false
	case "VAR":
		return true
	}
	if v.class(n) == 's' {
		inner := false
		for _, c := range n.children() {
			if v.irreducible(c, varArg, badCase) {
				inner = true
			}
		}
		if inner {
			*varArg = true
		}
		return inner
	}
	for _, c := range n.children() {
		if v.irreducible(c, varArg, badCase) {
			containsVar = true
		}
	}
	return containsVar
}

// citusRefusals checks every query in the tree root (CTEs and subqueries included) and returns
// why Citus would refuse it.
func citusRefusals(t *testing.T, conn *pgx.Conn, root *node) []string {
	v := &volatility{conn: conn, t: t, of: map[string]byte{}}
	var out []string
	var queries []*node
	find(root, true, func(n *node) bool {
		if n.typ == "QUERY" {
			queries = append(queries, n)
		}
		return false
	})
	for _, q := range queries {
		cmd := q.word("commandType")
		var quals *node
		if jt := q.child("jointree"); jt != nil {
			quals = jt.child("quals")
		}
		var targets []*node
		if tl := q.child("targetList"); tl != nil {
			for _, te := range tl.children() {
				if te.word("resjunk") != "true" {
					targets = append(targets, te.child("expr"))
				}
			}
		}
		volatileIn := func(n *node) bool {
			return find(n, false, func(c *node) bool { return v.class(c) == 'v' })
		}
		switch cmd {
		case "2", "4": // UPDATE, DELETE
			if volatileIn(quals) {
				out = append(out, "a volatile function in the WHERE of a distributed "+map[string]string{"2": "UPDATE", "4": "DELETE"}[cmd])
			}
			var varArg, badCase bool
			v.irreducible(quals, &varArg, &badCase)
			if cmd == "2" {
				for _, e := range targets {
					if volatileIn(e) {
						out = append(out, "a volatile function in a distributed UPDATE's SET list")
					}
					v.irreducible(e, &varArg, &badCase)
				}
			}
			if varArg {
				out = append(out, "a stable function (or operator) with a column among its arguments in a distributed UPDATE or DELETE")
			}
			if badCase {
				out = append(out, "a CASE or COALESCE holding a function that is not immutable in a distributed UPDATE or DELETE")
			}
		}
		if cmd == "2" || cmd == "3" || cmd == "4" {
			if rl := q.child("returningList"); rl != nil && find(rl, true, func(c *node) bool { return v.class(c) != 'i' }) {
				out = append(out, "a function that is not immutable in RETURNING")
			}
		}
		if oc := q.child("onConflict"); cmd == "3" && oc != nil {
			if ae := oc.child("arbiterElems"); ae != nil && len(ae.items) > 0 && !find(ae, false, isScopeVar(q)) {
				out = append(out, "ON CONFLICT on columns without scope_id: no unique index of a distributed table matches it")
			}
		}
		if rm := q.child("rowMarks"); cmd == "1" && rm != nil && len(rm.items) > 0 && !pinsScope(q, quals) {
			out = append(out, "SELECT ... FOR UPDATE without scope_id in its WHERE: a read of every shard, which Citus cannot lock")
		}
	}
	return out
}

// pinsScope reports whether quals (a conjunction) compares the distribution column scope_id of a
// table of q with a parameter or a constant.
func pinsScope(q *node, quals *node) bool {
	isScope := isScopeVar(q)
	return find(quals, false, func(n *node) bool {
		if n.typ != "OPEXPR" {
			return false
		}
		args := n.child("args")
		if args == nil || len(args.children()) != 2 {
			return false
		}
		a, b := args.children()[0], args.children()[1]
		other := func(x *node) bool { return x.typ == "PARAM" || x.typ == "CONST" }
		return (isScope(a) && other(b)) || (isScope(b) && other(a))
	})
}

// isScopeVar returns the test of whether a node is a column scope_id of a table of q.
func isScopeVar(q *node) func(*node) bool {
	var rtes []*node
	if rt := q.child("rtable"); rt != nil {
		rtes = rt.children()
	}
	return func(n *node) bool {
		if n.typ != "VAR" {
			return false
		}
		no, _ := strconv.Atoi(n.word("varno"))
		att, _ := strconv.Atoi(n.word("varattno"))
		if no < 1 || no > len(rtes) {
			return false
		}
		eref := rtes[no-1].child("eref")
		if eref == nil || eref.child("colnames") == nil {
			return false
		}
		cols := eref.child("colnames").items
		return att >= 1 && att <= len(cols) && cols[att-1] == `"`+migrations.DistributionColumn+`"`
	}
}
