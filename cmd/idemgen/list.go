package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/runtime/defaults"
)

func newListCmd() *cobra.Command {
	var lf loadFlags
	var format string
	cmd := &cobra.Command{
		Use:   "list SPEC",
		Short: "List the idempotent operations of a spec with their key, scope, mode and retention",
		Long: `List every operation marked idempotent (x-idempotent in the spec, an entry of the
--config file, an overlay, or with --infer a declared idempotency header or field), sorted by
path then method, with where the key travels, whether it is required, its scope, mode,
retention, lease and fingerprint exclusions.

--format json prints a stable document for scripts (shape in docs/cli.md).`,
		Example: `  idemgen list openapi.yaml
  idemgen list vendor.json --infer --format markdown
  idemgen list stripe.yaml --config idemgen.yaml --format json`,
		Args: specArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" && format != "markdown" {
				return &exitError{code: exitUsage, err: errorf("--format must be table, json or markdown, not %q", format)}
			}
			res, err := lf.result(cmd, args[0])
			if err != nil {
				if format == "json" {
					// A machine reader gets a document on every failure: the reason is its
					// one diagnostic (the message is on standard error too).
					writeListFailure(cmd.OutOrStdout(), args[0], err)
				}
				return err
			}
			// List what the run understood, even when it found errors (the diagnostics are
			// already on standard error), then fail: a list with errors is incomplete.
			failed := res.Diags.HasErrors() || res.Doc == nil
			if format == "json" {
				if err := writeListJSON(cmd.OutOrStdout(), args[0], res); err != nil {
					return err
				}
			}
			if res.Doc != nil && format != "json" {
				w := cmd.OutOrStdout()
				doc := res.Doc
				switch format {
				case "markdown":
					writeListMarkdown(w, doc)
				default:
					writeListTable(w, doc)
				}
				if len(doc.Operations) == 0 && format != "json" && !failed {
					fmt.Fprintln(cmd.ErrOrStderr(), noOperationsHint(args[0], doc, lf.infer))
				}
			}
			if failed {
				fmt.Fprintln(cmd.ErrOrStderr(), summary(args[0], res))
				return &exitError{code: exitSpec}
			}
			return nil
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVar(&format, "format", "table", "output `FORMAT`: table, json or markdown")
	return cmd
}

// listVersion is the version of the JSON shape below; it changes only when a field changes
// meaning or disappears (adding fields keeps it).
const listVersion = 1

type listDoc struct {
	Version    int    `json:"version"`
	Source     string `json:"source"`
	OpenAPI    string `json:"openapi"`
	Title      string `json:"title"`
	APIVersion string `json:"apiVersion"`
	// Errors and Warnings count the diagnostics of the run (printed on standard error); with
	// errors the list holds what was understood and the command exits 1.
	Errors     int      `json:"errors"`
	Warnings   int      `json:"warnings"`
	Operations []listOp `json:"operations"`
	// Readable is false when the document could not be read at all (or an overlay could not
	// be applied): operations is then empty and diagnostics say why.
	Readable bool `json:"readable"`
	// Diagnostics are the run's errors and warnings, sorted as on standard error.
	Diagnostics []listDiag `json:"diagnostics"`
}

// listDiag is one diagnostic: where (file, 1-based line and column, 0 when unknown; the JSON
// pointer inside the file), its severity and stable code, the message and the way out (hint).
type listDiag struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Pointer  string `json:"pointer"`
	Message  string `json:"message"`
	Hint     string `json:"hint"`
}

type listOp struct {
	Method             string `json:"method"`
	Path               string `json:"path"`
	OperationID        string `json:"operationId"`
	OperationIDDerived bool   `json:"operationIdDerived"`
	GoName             string `json:"goName"`
	Mark               string `json:"mark"`
	// Annotations are other tools' idempotency and retry extensions on the operation (or at
	// the root, applying to it) and what idemgen read them as: mark, key or retries.
	Annotations      []listAnnotation `json:"annotations"`
	Key              listKey          `json:"key"`
	Scope            string           `json:"scope"`
	Mode             string           `json:"mode"`
	Retention        string           `json:"retention"`
	RetentionSeconds int64            `json:"retentionSeconds"`
	Lease            string           `json:"lease"`
	LeaseSeconds     int64            `json:"leaseSeconds"`
	Wait             string           `json:"wait"`
	Tombstone        string           `json:"tombstone"`
	TombstoneSeconds int64            `json:"tombstoneSeconds"`
	Execution        listExecution    `json:"execution"`
	Profile          string           `json:"profile,omitempty"`
	ScopeHeaders     []string         `json:"scopeHeaders,omitempty"`
	Fingerprint      listFP           `json:"fingerprint"`
	Replay           listReplay       `json:"replay"`
	Limits           listLimits       `json:"limits"`
	Body             listBody         `json:"body"`
	Location         string           `json:"location"`
}

type listAnnotation struct {
	Extension string `json:"extension"`
	Tool      string `json:"tool"`
	Read      string `json:"read"`
	Location  string `json:"location"`
}

type listKey struct {
	Carrier   string `json:"carrier"`
	Name      string `json:"name"`
	Required  bool   `json:"required"`
	MinLength int    `json:"minLength"`
	MaxLength int    `json:"maxLength"`
	Pattern   string `json:"pattern"`
	// Sources says where each rule came from: settings, spec or default.
	Sources listSources `json:"sources"`
	// Standard is the convention the key follows (docs/cli.md, standards); FirstSent is the
	// Repeatability-First-Sent header the spec declares beside an OASIS key ("" when none).
	Standard  string `json:"standard"`
	FirstSent string `json:"firstSent"`
	// Characters, Quoted and Echo are key.characters, key.quoted and key.echo.
	Characters string `json:"characters"`
	Quoted     string `json:"quoted"`
	Echo       bool   `json:"echo"`
}

type listBody struct {
	Nulls   string `json:"nulls"`
	Unknown string `json:"unknown"`
}

type listSources struct {
	Required  string `json:"required"`
	MinLength string `json:"minLength"`
	MaxLength string `json:"maxLength"`
	Pattern   string `json:"pattern"`
}

type listFP struct {
	Exclude []string `json:"exclude"`
	Headers []string `json:"headers"`
	Body    string   `json:"body"`
}

type listReplay struct {
	Headers  []string `json:"headers"`
	Statuses []string `json:"statuses"`
}

// listExecution is execution.*: whether a handler holding its key runs detached from its
// client, and for how long at most.
type listExecution struct {
	Detach       bool   `json:"detach"`
	Limit        string `json:"limit"`
	LimitSeconds int64  `json:"limitSeconds"`
}

type listLimits struct {
	Body     int64 `json:"body"`
	Response int64 `json:"response"`
	Part     int64 `json:"part"`
}

// writeListJSON writes the list document of a run: the operations understood (none when the
// document could not be read) and every diagnostic.
func writeListJSON(w io.Writer, specPath string, res *spec.Result) error {
	errs, warns := tally(res.Diags)
	out := listDoc{Version: listVersion, Source: specPath, Errors: errs, Warnings: warns, Operations: []listOp{},
		Readable: res.Doc != nil, Diagnostics: []listDiag{}}
	for _, d := range res.Diags.Sorted() {
		out.Diagnostics = append(out.Diagnostics, listDiag{Severity: d.Severity.String(), Code: d.Code, File: d.Loc.File,
			Line: d.Loc.Line, Column: d.Loc.Column, Pointer: d.Loc.Pointer, Message: d.Message, Hint: d.Hint})
	}
	if doc := res.Doc; doc != nil {
		out.Source, out.OpenAPI, out.Title, out.APIVersion = doc.Source, doc.OpenAPI, doc.Title, doc.Version
		out.Operations = listOps(doc)
	}
	return encodeList(w, out)
}

// writeListFailure writes the list document of a run that could not load the spec at all (a
// file that does not exist, a bad --ref-map): the error is its one diagnostic.
func writeListFailure(w io.Writer, specPath string, err error) {
	dg := listDiag{Severity: "error", Code: "usage", Message: err.Error()}
	if rest, ok := strings.CutPrefix(err.Error(), "load "); ok {
		// spec.Load's "load FILE: reason": an input file that cannot be read.
		if file, reason, ok := strings.Cut(rest, ": "); ok {
			dg.Code, dg.File, dg.Message = "read-failed", file, reason
		}
	}
	out := listDoc{Version: listVersion, Source: specPath, Errors: 1, Operations: []listOp{}, Diagnostics: []listDiag{dg}}
	_ = encodeList(w, out) // the error itself is returned and printed by the caller
}

func encodeList(w io.Writer, out listDoc) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// listOps are the marked operations of doc as the JSON document shows them.
func listOps(doc *model.Document) []listOp {
	ops := []listOp{}
	for _, op := range doc.Operations {
		s := op.Settings
		lo := listOp{
			Method: op.Method, Path: op.Path, OperationID: op.ID, OperationIDDerived: op.IDDerived, GoName: op.GoName,
			Mark: string(op.Mark),
			Key: listKey{Carrier: string(s.Key.Carrier), Name: keyName(s.Key), Required: s.Key.Required,
				MinLength: s.Key.MinLength, MaxLength: s.Key.MaxLength, Pattern: s.Key.Pattern,
				Sources: listSources{Required: string(s.Key.Sources.Required), MinLength: string(s.Key.Sources.MinLength),
					MaxLength: string(s.Key.Sources.MaxLength), Pattern: string(s.Key.Sources.Pattern)},
				Standard: string(s.Key.Standard), FirstSent: s.Key.FirstSent,
				Characters: s.Key.Characters, Quoted: s.Key.Quoted, Echo: s.Key.Echo},
			Scope: string(s.Scope), Mode: string(s.Mode),
			Retention: model.DurationText(s.Retention), RetentionSeconds: int64(s.Retention / time.Second),
			Lease: model.DurationText(s.Lease), LeaseSeconds: int64(s.Lease / time.Second),
			Wait:      model.DurationText(s.Wait),
			Tombstone: model.DurationText(s.Tombstone), TombstoneSeconds: int64(s.Tombstone / time.Second),
			Execution: listExecution{Detach: s.Detach, Limit: model.DurationText(s.ExecutionLimit), LimitSeconds: int64(s.ExecutionLimit / time.Second)},
			Profile:   string(s.Profile), ScopeHeaders: s.ScopeHeaders,
			Fingerprint: listFP{Exclude: excludes(s), Headers: nonNil(s.Fingerprint.Headers), Body: string(s.Fingerprint.Body)},
			Replay:      listReplay{Headers: nonNil(s.Replay.Headers), Statuses: statuses(s.Replay.Statuses)},
			Limits:      listLimits{Body: s.BodyLimit, Response: s.ResponseLimit, Part: s.PartLimit},
			Body:        listBody{Nulls: string(s.Body.Nulls), Unknown: string(s.Body.Unknown)},
			Location:    op.Loc.String(),
		}
		lo.Annotations = []listAnnotation{}
		for _, a := range op.Annotations {
			lo.Annotations = append(lo.Annotations, listAnnotation{Extension: a.Extension, Tool: a.Tool, Read: a.Read, Location: a.Loc.String()})
		}
		ops = append(ops, lo)
	}
	return ops
}

// keyName is the header name, body JSON pointer or form field name carrying the key.
func keyName(k model.KeySettings) string {
	switch k.Carrier {
	case model.CarrierBody:
		return k.Pointer
	case model.CarrierForm:
		return k.Field
	case model.CarrierQuery:
		return k.Query
	}
	return k.Header
}

func excludes(s model.Settings) []string {
	out := []string{}
	for _, p := range s.Fingerprint.Exclude {
		out = append(out, p.Raw)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func statuses(rules []model.StatusRule) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, defaults.StatusRule(r).String())
	}
	return out
}

// row is one operation as the table and Markdown formats show it.
func row(op *model.Operation) []string {
	s := op.Settings
	key := string(s.Key.Carrier) + " " + keyName(s.Key)
	req := "required"
	if !s.Key.Required {
		req = "optional"
	}
	excl := strings.Join(excludes(s), ",")
	if excl == "" {
		excl = "-"
	}
	return []string{op.Method, op.Path, op.ID, key, req, string(s.Scope), string(s.Mode), model.DurationText(s.Retention), model.DurationText(s.Lease), excl}
}

var listHeader = []string{"METHOD", "PATH", "OPERATION", "KEY", "REQUIRED", "SCOPE", "MODE", "RETENTION", "LEASE", "EXCLUDE"}

func writeListTable(w io.Writer, doc *model.Document) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(listHeader, "\t"))
	for _, op := range doc.Operations {
		fmt.Fprintln(tw, strings.Join(row(op), "\t"))
	}
	tw.Flush()
}

func writeListMarkdown(w io.Writer, doc *model.Document) {
	cols := []string{"Method", "Path", "Operation", "Key", "Required", "Scope", "Mode", "Retention", "Lease", "Exclude"}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, op := range doc.Operations {
		cells := row(op)
		for i, c := range cells {
			cells[i] = "`" + strings.ReplaceAll(c, "|", `\|`) + "`"
			if i >= 4 {
				cells[i] = strings.ReplaceAll(c, "|", `\|`)
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}
