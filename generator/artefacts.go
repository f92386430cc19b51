package generator

import (
	"bytes"
	"fmt"
	"slices"
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
	MinRetention   string
	MixedRetention bool
	BodyLimit      string
	// Async lists the operations that declare a 202 Accepted response (long-running
	// operations), for the contract's section on them.
	Async []string
}

type contractOp struct {
	ID, Method, Path, Summary string
	KeyWhere                  string
	Required                  bool
	MinLength, MaxLength      int
	Pattern                   string
	ScopeOperation            bool
	Retention                 string
	Excluded, Headers         []string
	Raw                       bool
	// Statuses is replay.statuses in its written form ("2xx, 402, !409"), "" for the default.
	Statuses string
}

// Contract renders the client-facing Markdown contract of doc's marked operations
// (templates/contract.md.tmpl): which operations are idempotent, the key and its rules,
// retention, status codes and problem types, the replay marker and how to retry.
func Contract(doc *model.Document) ([]byte, error) {
	v := contractView{Title: doc.Title, Version: doc.Version}
	var minRet time.Duration
	limits := map[int64]bool{}
	for _, op := range doc.Operations {
		s := op.Settings
		o := contractOp{
			ID: op.ID, Method: op.Method, Path: op.Path, Summary: oneLine(op.Summary),
			Required: s.Key.Required, MinLength: s.Key.MinLength, MaxLength: s.Key.MaxLength,
			Pattern: s.Key.Pattern, ScopeOperation: s.Scope == model.ScopeOperation,
			Retention: fmtDuration(s.Retention), Headers: s.Fingerprint.Headers,
			Raw: s.Fingerprint.Body == model.BodyRaw,
		}
		switch s.Key.Carrier {
		case model.CarrierBody:
			o.KeyWhere = "body member `" + s.Key.Pointer + "`"
		case model.CarrierForm:
			o.KeyWhere = "form field `" + s.Key.Field + "`"
		default:
			o.KeyWhere = "header `" + s.Key.Header + "`"
		}
		for _, p := range s.Fingerprint.Exclude {
			o.Excluded = append(o.Excluded, p.Raw)
		}
		if s.Scope != model.ScopeOperation {
			v.AnyTenantScope = true
		}
		if len(s.Replay.Statuses) > 0 && !defaultStatuses(s.Replay.Statuses) {
			v.CustomStatuses = true
			var rs []string
			for _, r := range s.Replay.Statuses {
				rs = append(rs, "`"+defaults.StatusRule(r).String()+"`")
			}
			o.Statuses = strings.Join(rs, ", ")
		}
		if minRet == 0 || s.Retention < minRet {
			if minRet != 0 {
				v.MixedRetention = true
			}
			minRet = s.Retention
		} else if s.Retention != minRet {
			v.MixedRetention = true
		}
		limits[s.BodyLimit] = true
		if slices.Contains(op.Responses, "202") {
			v.Async = append(v.Async, op.ID)
		}
		v.Ops = append(v.Ops, o)
	}
	v.MinRetention = fmtDuration(minRet)
	var ls []string
	for _, op := range doc.Operations {
		if l := fmtSize(op.Settings.BodyLimit); !contains(ls, l) {
			ls = append(ls, l)
		}
	}
	v.BodyLimit = strings.Join(ls, " or ")
	if len(doc.Operations) == 0 {
		v.MinRetention, v.BodyLimit = "24h", "1 MiB"
	}
	return execute(templates.Contract, v)
}

// SQL renders the idempotency store schema: templates/schema.sql.tmpl around the PostgreSQL
// store's migrations in order (runtime/pgstore/migrations, which links no database driver).
func SQL() ([]byte, error) {
	return execute(templates.Schema, struct{ SQL string }{strings.TrimRight(migrations.SchemaSQL(), "\n")})
}

func execute(name string, data any) ([]byte, error) {
	t, err := templates.Parse(name, template.FuncMap{})
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
