package generator

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
	"github.com/idemgen/idemgen/templates"
)

// contractView is the data of templates/contract.md.tmpl: the model's settings already turned
// into the words a client reads, so the template only lays them out.
type contractView struct {
	Title, Version string
	Ops            []contractOp
	AnyTenantScope bool
	CustomStatuses bool
	// DefaultStatuses says which outcomes replay.statuses' default stores
	// (defaults.Statuses), in words.
	DefaultStatuses string
	MinRetention    string
	MixedRetention  bool
	BodyLimit       string
	// Async lists the operations that declare a 202 Accepted response (long-running
	// operations), for the contract's section on them.
	Async []string
	// AnyNulls: some operation reads null as "clear it" (contractOp.Nulls).
	AnyNulls bool
	// Tombstones: some operation remembers its keys after the retention (tombstone), so a
	// late retry gets 410 result-expired; MinTombstone is the shortest such horizon.
	Tombstones   bool
	MinTombstone string
}

type contractOp struct {
	ID, Method, Path, Summary string
	KeyWhere                  string
	Required                  bool
	MinLength, MaxLength      int
	Pattern                   string
	// Characters and Quoted are key.characters and key.quoted ("visible", "accept" by
	// default); Echo is key.echo; Nulls is body.nulls: clear on a JSON body, or a merge patch.
	Characters, Quoted string
	Echo, Nulls        bool
	// ScopeOperation and ScopePath: keys are unique per operation, or per endpoint path.
	ScopeOperation, ScopePath bool
	Retention                 string
	Excluded, Headers         []string
	Raw                       bool
	// Statuses says which outcomes the operation's replay.statuses store, in words ("every
	// `2xx` and `402`"), "" for the default.
	Statuses string
}

// Contract renders the client-facing Markdown contract of doc's marked operations
// (templates/contract.md.tmpl): which operations are idempotent, the key and its rules,
// retention, status codes and problem types, the replay marker and how to retry. The template
// names a problem's status as {{status "in-flight"}}: runtime/defaults' table, the statuses the
// runtime answers with.
func Contract(doc *model.Document) ([]byte, error) {
	v := contractView{Title: doc.Title, Version: doc.Version, DefaultStatuses: statusWords(defaults.Statuses())}
	var minRet, minTomb time.Duration
	limits := map[int64]bool{}
	for _, op := range doc.Operations {
		s := op.Settings
		o := contractOp{
			ID: op.ID, Method: op.Method, Path: op.Path, Summary: oneLine(op.Summary),
			Required: s.Key.Required, MinLength: s.Key.MinLength, MaxLength: s.Key.MaxLength,
			Pattern: s.Key.Pattern, Characters: s.Key.Characters, Quoted: s.Key.Quoted, Echo: s.Key.Echo || opRow(op).EchoKey,
			Nulls: s.Body.Nulls == model.NullsClear || mergePatchBody(op), ScopeOperation: s.Scope == model.ScopeOperation,
			ScopePath: s.Scope == model.ScopePath,
			Retention: model.DurationText(s.Retention), Headers: s.Fingerprint.Headers,
			Raw: s.Fingerprint.Body == model.BodyRaw,
		}
		switch s.Key.Carrier {
		case model.CarrierBody:
			o.KeyWhere = "body member `" + s.Key.Pointer + "`"
		case model.CarrierForm:
			o.KeyWhere = "form field `" + s.Key.Field + "`"
		case model.CarrierQuery:
			o.KeyWhere = "query parameter `" + s.Key.Query + "`"
		default:
			o.KeyWhere = "header `" + s.Key.Header + "`"
		}
		for _, p := range s.Fingerprint.Exclude {
			o.Excluded = append(o.Excluded, p.Raw)
		}
		if s.Scope == model.ScopeTenant {
			v.AnyTenantScope = true
		}
		v.AnyNulls = v.AnyNulls || o.Nulls
		if len(s.Replay.Statuses) > 0 && !defaultStatuses(s.Replay.Statuses) {
			v.CustomStatuses = true
			// In words, as defaults.Final reads the rules (the last matching rule decides): the
			// written list ["2xx", "!404", "4xx"] reads as "not 404" to a client, and stores it.
			rs := make([]defaults.StatusRule, len(s.Replay.Statuses))
			for i, r := range s.Replay.Statuses {
				rs[i] = defaults.StatusRule(r)
			}
			o.Statuses = statusWords(rs)
		}
		if minRet == 0 || s.Retention < minRet {
			if minRet != 0 {
				v.MixedRetention = true
			}
			minRet = s.Retention
		} else if s.Retention != minRet {
			v.MixedRetention = true
		}
		if s.Tombstone > 0 && (minTomb == 0 || s.Tombstone < minTomb) {
			minTomb = s.Tombstone
		}
		limits[s.BodyLimit] = true
		if slices.Contains(op.Responses, "202") {
			v.Async = append(v.Async, op.ID)
		}
		v.Ops = append(v.Ops, o)
	}
	v.MinRetention = model.DurationText(minRet)
	if minTomb > 0 {
		v.Tombstones, v.MinTombstone = true, model.DurationText(minTomb)
	}
	var ls []string
	for _, op := range doc.Operations {
		if l := fmtSize(op.Settings.BodyLimit); !contains(ls, l) {
			ls = append(ls, l)
		}
	}
	v.BodyLimit = strings.Join(ls, " or ")
	if len(doc.Operations) == 0 {
		v.MinRetention, v.BodyLimit = model.DurationText(defaults.Retention), fmtSize(defaults.BodyLimit)
		v.Tombstones, v.MinTombstone = true, model.DurationText(defaults.Tombstone)
	}
	row := contractRow(doc)
	return execute(templates.Contract, v, template.FuncMap{"status": func(name string) (int, error) { return problemStatus(row, name) }})
}

// opRow is the row of the contract table op answers in: its profile's, else idemgen's own.
func opRow(op *model.Operation) defaults.Profile {
	row, ok := defaults.ProfileNamed(string(op.Settings.Profile))
	if !ok {
		row, _ = defaults.ProfileNamed(defaults.ProfileDefault)
	}
	return row
}

// contractRow is the row of the contract table the operations answer in: their profile when
// they all name the same, else idemgen's own.
func contractRow(doc *model.Document) defaults.Profile {
	name := defaults.ProfileDefault
	for i, op := range doc.Operations {
		p := string(op.Settings.Profile)
		if p == "" {
			p = defaults.ProfileDefault
		}
		if i > 0 && p != name {
			name = defaults.ProfileDefault
			break
		}
		name = p
	}
	row, _ := defaults.ProfileNamed(name)
	return row
}

// problemStatus is the status row answers problem name with; an unknown name is an error, so
// the contract cannot name a problem the runtime does not have.
func problemStatus(row defaults.Profile, name string) (int, error) {
	if _, ok := defaults.ProblemNamed(name); ok {
		return row.Answer(name).Status, nil
	}
	return 0, fmt.Errorf("no problem %q in runtime/defaults", name)
}

// statusWords says in words which statuses rules store (defaults.Final, the rule the runtime
// stores by): every `2xx` and `4xx` except `408` and `409`. A class most of whose statuses are
// stored is named as a class with its exceptions; the stored statuses of another class are
// named one by one.
func statusWords(rules []defaults.StatusRule) string {
	var in, out []string
	for class := 1; class <= 5; class++ {
		final := defaults.FinalIn(rules, class)
		if len(final) < 50 {
			for _, st := range final {
				in = append(in, "`"+strconv.Itoa(st)+"`")
			}
			continue
		}
		in = append(in, "`"+strconv.Itoa(class)+"xx`")
		for st := class * 100; st < class*100+100; st++ {
			if !slices.Contains(final, st) {
				out = append(out, "`"+strconv.Itoa(st)+"`")
			}
		}
	}
	if len(in) == 0 {
		return "no status"
	}
	s := "every " + andList(in)
	if len(out) > 0 {
		s += " except " + andList(out)
	}
	return s
}

// andList joins items as prose does: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// SQL renders the idempotency store schema: templates/schema.sql.tmpl around the PostgreSQL
// store's migrations in order (runtime/pgstore/migrations, which links no database driver).
func SQL() ([]byte, error) {
	return execute(templates.Schema, struct{ SQL string }{strings.TrimRight(migrations.SchemaSQL(), "\n")}, nil)
}

// execute renders the template name, parsed with funcs, on data.
func execute(name string, data any, funcs template.FuncMap) ([]byte, error) {
	t, err := templates.Parse(name, funcs)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// defaultStatuses reports whether rules are replay.statuses' default (defaults.Statuses).
func defaultStatuses(rules []model.StatusRule) bool {
	return slices.EqualFunc(rules, defaults.Statuses(), func(r model.StatusRule, d defaults.StatusRule) bool { return defaults.StatusRule(r) == d })
}

// fmtSize prints a byte count with the binary suffixes of docs/design.md section 2.
func fmtSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// oneLine keeps a summary inside one Markdown table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// mergePatchBody reports whether op takes a JSON merge patch body (RFC 7396).
func mergePatchBody(op *model.Operation) bool {
	if op.Body == nil {
		return false
	}
	for _, c := range op.Body.Contents {
		if c.MediaType == "application/merge-patch+json" {
			return true
		}
	}
	return false
}
