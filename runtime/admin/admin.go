// Package admin serves idempotency records to support staff: a read-only http.Handler with a
// small HTML page (search by tenant and key) and the same data as JSON, over a store that
// implements store.Inspector (runtime/pgstore does).
//
// The handler has no authentication of its own: mount it behind yours, on an internal listener
// or under a path your staff middleware guards, and strip the prefix:
//
//	h, err := admin.New(st, admin.Options{Operations: api.Operations()})
//	mux.Handle("/admin/idempotency/", http.StripPrefix("/admin/idempotency", requireStaff(h)))
//
// Routes, relative to where it is mounted:
//
//	GET  /            the support page (a search form)
//	POST /            the support page with the records of the posted tenant and key
//	GET  /records     JSON: {"tenant", "key", "records": [RecordInfo...]}; query
//	POST /records       parameters, a form or a JSON object: tenant, key, operation, body,
//	                    and the values of scope headers (JSON "scope_headers": {"Name": "value"};
//	                    form or query "h:Name=value"), which operations declaring
//	                    Operation.ScopeHeaders store in their scope
//	GET  /stats       JSON: store.Stats (reads every record: use sparingly)
//	GET  /uncertain   JSON: {"records": [RecordInfo...]}, the uncertain records
//	                    (Uncertain), oldest first; query parameters since (RFC 3339, or
//	                    a duration back from now such as 24h) and limit (default 100, at most
//	                    1000). The page lists the 50 oldest too.
//	GET  /style.css   the page's style sheet
//
// The page's search form posts, so tenants and keys stay out of URLs, access logs and
// Referer headers. Stored bodies are read only when asked for (the page's "Show stored bodies"
// toggle, or body=true). Everything stored is shown as text: the page is rendered with
// html/template (escaped), runs no script, and every answer carries a Content-Security-Policy
// that forbids scripts, frames and foreign resources, with Referrer-Policy: no-referrer and
// Cache-Control: no-store.
package admin

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/store"
)

// ContentSecurityPolicy is the policy of every answer: no script, no frame, no foreign
// resource; styles only from the handler's own style sheet; forms only to the handler.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxForm bounds a posted search (a tenant, a key and an operation ID).
const maxForm = 64 << 10

//go:embed page.html.tmpl style.css
var assets embed.FS

// Options configures the handler. Zero values take the defaults stated on each field.
type Options struct {
	// Operations are the service's operations (the generated Operations()): the page offers
	// them in its operation menu, and a search without an operation also finds the key's
	// records of operations declared `scope: operation`.
	Operations []*runtime.Operation
	// Title heads the page; default "Idempotency records".
	Title string
	// Timeout bounds each store read; default 5s.
	Timeout time.Duration
}

// handler is the admin http.Handler. It keeps no state besides its configuration.
type handler struct {
	st    store.Store
	opts  Options
	opIDs []string
	// pathScoped: an operation is declared `scope: path`, so the form asks for the request's
	// path.
	pathScoped bool
	// scopeHeaders are the operations' ScopeHeaders (canonical names, sorted): the form asks
	// for their values, which are part of those operations' scopes.
	scopeHeaders []string
	page         *template.Template
	css          []byte
	timeout      time.Duration
}

// New returns the read-only admin handler over st. It fails when st does not implement
// store.Inspector (ErrNoInspector) or, never in practice, when its embedded page does not
// parse.
func New(st store.Store, opts Options) (http.Handler, error) {
	if _, ok := st.(store.Inspector); !ok || st == nil {
		return nil, ErrNoInspector
	}
	if opts.Title == "" {
		opts.Title = "Idempotency records"
	}
	h := &handler{st: st, opts: opts, timeout: opts.Timeout}
	if h.timeout <= 0 {
		h.timeout = 5 * time.Second
	}
	seen := map[string]bool{}
	for _, op := range opts.Operations {
		if op == nil {
			continue
		}
		if !seen[op.ID] {
			seen[op.ID] = true
			h.opIDs = append(h.opIDs, op.ID)
		}
		h.pathScoped = h.pathScoped || op.Scope == runtime.ScopePath
		for _, name := range op.ScopeHeaders {
			if name = http.CanonicalHeaderKey(name); !seen["h:"+name] {
				seen["h:"+name] = true
				h.scopeHeaders = append(h.scopeHeaders, name)
			}
		}
	}
	sort.Strings(h.opIDs)
	sort.Strings(h.scopeHeaders)
	var err error
	funcs := template.FuncMap{"stamp": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			return stamp(t)
		case *time.Time:
			if t != nil {
				return stamp(*t)
			}
		}
		return ""
	}}
	if h.page, err = template.New("page.html.tmpl").Funcs(funcs).ParseFS(assets, "page.html.tmpl"); err != nil {
		return nil, fmt.Errorf("admin: page template: %w", err)
	}
	if h.css, err = assets.ReadFile("style.css"); err != nil {
		return nil, fmt.Errorf("admin: style sheet: %w", err)
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	path := "/" + strings.TrimLeft(r.URL.Path, "/")
	switch path {
	case "/":
		if !allow(w, r, http.MethodGet, http.MethodHead, http.MethodPost) {
			return
		}
		h.servePage(w, r)
	case "/records":
		if !allow(w, r, http.MethodGet, http.MethodHead, http.MethodPost) {
			return
		}
		h.serveRecords(w, r)
	case "/stats":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		h.serveStats(w, r)
	case "/uncertain":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		h.serveUncertain(w, r)
	case "/style.css":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		hd.Set("Content-Type", "text/css; charset=utf-8")
		w.Write(h.css)
	default:
		writeProblem(w, http.StatusNotFound, "not-found", "No such page: the admin handler serves /, /records, /stats, /uncertain and /style.css.")
	}
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "The admin handler is read-only.")
	return false
}

// query is one search: a tenant, a key, an optional operation, the values of scope headers,
// and whether to read bodies.
type query struct {
	Tenant       string            `json:"tenant"`
	Key          string            `json:"key"`
	Operation    string            `json:"operation"`
	Path         string            `json:"path"`
	ScopeHeaders map[string]string `json:"scope_headers"`
	Body         bool              `json:"body"`
}

// header returns the scope header values as an http.Header.
func (q *query) header() http.Header {
	h := http.Header{}
	for k, v := range q.ScopeHeaders {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

// readQuery reads a search from a JSON body, a form body or the URL's query; a form carries a
// scope header's value as the field "h:<Header-Name>".
func (h *handler) readQuery(w http.ResponseWriter, r *http.Request) (query, error) {
	var q query
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
			dec := json.NewDecoder(r.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&q); err != nil {
				return q, fmt.Errorf("the JSON search is not an object of tenant, key, operation, path, scope_headers and body: %v", err)
			}
			return q, nil
		}
	}
	if err := r.ParseForm(); err != nil {
		return q, fmt.Errorf("the search could not be read: %v", err)
	}
	q.Tenant = r.Form.Get("tenant")
	q.Key = r.Form.Get("key")
	q.Operation = strings.TrimSpace(r.Form.Get("operation"))
	q.Path = strings.TrimSpace(r.Form.Get("path"))
	for _, name := range h.scopeHeaders {
		if v := r.Form.Get("h:" + name); v != "" {
			if q.ScopeHeaders == nil {
				q.ScopeHeaders = map[string]string{}
			}
			q.ScopeHeaders[name] = v
		}
	}
	switch strings.ToLower(r.Form.Get("body")) {
	case "1", "true", "on", "yes":
		q.Body = true
	}
	return q, nil
}

func (h *handler) lookup(ctx context.Context, q query) ([]RecordInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	return Lookup(ctx, h.st, q.Tenant, q.Key, LookupOptions{
		Operation: q.Operation, Operations: h.opts.Operations, Body: q.Body, ScopeHeaders: q.header(), Path: q.Path,
	})
}

func (h *handler) serveRecords(w http.ResponseWriter, r *http.Request) {
	q, err := h.readQuery(w, r)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "search-invalid", err.Error())
		return
	}
	if strings.TrimSpace(q.Tenant) == "" || strings.TrimSpace(q.Key) == "" {
		writeProblem(w, http.StatusBadRequest, "search-invalid", "Both tenant and key are required.")
		return
	}
	recs, err := h.lookup(r.Context(), q)
	if err != nil {
		status, name := failure(err)
		writeProblem(w, status, name, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Tenant  string       `json:"tenant"`
		Key     string       `json:"key"`
		Records []RecordInfo `json:"records"`
	}{q.Tenant, q.Key, recs})
}

func (h *handler) serveStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	s, err := Stats(ctx, h.st)
	if err != nil {
		status, name := failure(err)
		writeProblem(w, status, name, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// serveUncertain answers the uncertain records as JSON.
func (h *handler) serveUncertain(w http.ResponseWriter, r *http.Request) {
	opts := UncertainOptions{Limit: 100}
	q := r.URL.Query()
	if v := q.Get("since"); v != "" {
		since, err := parseSince(v, time.Now())
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "search-invalid", err.Error())
			return
		}
		opts.Since = since
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeProblem(w, http.StatusBadRequest, "search-invalid", "limit must be a number from 1 to 1000.")
			return
		}
		opts.Limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	recs, err := Uncertain(ctx, h.st, opts)
	if err != nil {
		status, name := failure(err)
		writeProblem(w, status, name, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Records []RecordInfo `json:"records"`
	}{recs})
}

// parseSince reads a point in time: RFC 3339, or a duration before now ("24h").
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: want an RFC 3339 time or a positive duration such as 24h", v)
}

// failure maps a lookup error to a status: a malformed key is the caller's (400), anything else
// the store's (503).
func failure(err error) (int, string) {
	if errors.Is(err, ErrLookupInvalid) {
		return http.StatusBadRequest, "search-invalid"
	}
	return http.StatusServiceUnavailable, "store-unavailable"
}

// pageData is what page.html.tmpl shows.
type pageData struct {
	Title      string
	Operations []string
	// ScopeHeaders are the scope headers' names and the values searched.
	ScopeHeaders [][2]string
	// PathScoped asks for the request's path (an operation is declared scope: path).
	PathScoped bool
	Q          query
	Searched   bool
	Error      string
	Records    []recordView
	// Uncertain are the oldest uncertain records (pageUncertain of them); UncertainError is
	// why they could not be read.
	Uncertain      []recordView
	UncertainMore  bool
	UncertainError string
	// Refused and Released are the statuses of answers that leave no record (noRecord).
	Refused, Released string
}

// noRecord lists the statuses of answers that leave no record, for the page that finds none:
// the refusals before the key is read (the statuses runtime/defaults answers body-invalid,
// unauthenticated, body-too-large and media-type-unsupported with), and the outcomes
// replay.statuses' default does not store (every 5xx and the codes it excludes).
func noRecord() (refused, released string) {
	var rs []string
	for _, p := range defaults.Problems() {
		switch p.Name {
		case defaults.ProblemBodyInvalid, defaults.ProblemUnauthenticated, defaults.ProblemBodyTooLarge, defaults.ProblemMediaTypeUnsupported:
			rs = append(rs, strconv.Itoa(p.Status))
		}
	}
	var ls []string
	if len(defaults.FinalIn(nil, 5)) == 0 {
		ls = append(ls, "5xx")
	}
	for _, class := range []int{2, 4} { // the classes the default stores, but for their exceptions
		for st := class * 100; st < class*100+100; st++ {
			if !defaults.Final(nil, st) {
				ls = append(ls, strconv.Itoa(st))
			}
		}
	}
	return strings.Join(rs, ", "), strings.Join(ls, ", ")
}

// pageUncertain is how many uncertain records the page lists.
const pageUncertain = 50

// recordView is one record laid out for the page.
type recordView struct {
	RecordInfo
	StateLabel string
	KeyKind    string
	Lease      string
	HeaderRows [][2]string
	BodyShown  bool
	BodyIsText bool
	BodyShow   string
}

func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	d := pageData{Title: h.opts.Title, Operations: h.opIDs}
	d.Refused, d.Released = noRecord()
	status := http.StatusOK
	if r.Method == http.MethodPost {
		d.Searched = true
		q, err := h.readQuery(w, r)
		d.Q = q
		switch {
		case err != nil:
			status, d.Error = http.StatusBadRequest, err.Error()
		case strings.TrimSpace(q.Tenant) == "" || strings.TrimSpace(q.Key) == "":
			status, d.Error = http.StatusBadRequest, "Enter both a tenant and an idempotency key."
		default:
			recs, err := h.lookup(r.Context(), q)
			if err != nil {
				status, _ = failure(err)
				d.Error = err.Error()
				if status >= 500 {
					d.Error = "The idempotency store could not be read: " + err.Error()
				}
				break
			}
			for _, rec := range recs {
				d.Records = append(d.Records, view(rec, q.Body))
			}
		}
	}
	for _, name := range h.scopeHeaders {
		d.ScopeHeaders = append(d.ScopeHeaders, [2]string{name, d.Q.ScopeHeaders[name]})
	}
	d.PathScoped = h.pathScoped
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	uncertain, err := Uncertain(ctx, h.st, UncertainOptions{Limit: pageUncertain + 1})
	cancel()
	if err != nil {
		d.UncertainError = "The uncertain records could not be read: " + err.Error()
	}
	if len(uncertain) > pageUncertain {
		uncertain, d.UncertainMore = uncertain[:pageUncertain], true
	}
	for _, rec := range uncertain {
		d.Uncertain = append(d.Uncertain, view(rec, false))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = h.page.Execute(w, d)
}

func view(rec RecordInfo, bodyAsked bool) recordView {
	v := recordView{RecordInfo: rec, KeyKind: "tenant-wide key"}
	if rec.PerOperation {
		v.KeyKind = "per-operation key (scope: operation or path)"
	}
	switch rec.State {
	case "completed":
		v.StateLabel = "completed: retries replay the stored response"
	case "running":
		v.StateLabel = "running: the first request has not finished"
	case "uncertain":
		v.StateLabel = "uncertain (" + strings.ReplaceAll(rec.Uncertain, "_", " ") + "): provider calls were made and no completion is known"
	case "tombstone":
		v.StateLabel = fmt.Sprintf("tombstone: the %dxx answer is gone; a retry gets 410 result-expired and does not run again", rec.StatusClass)
	case "expired":
		v.StateLabel = "expired: the key counts as new; the record waits for the sweeper"
	}
	switch {
	case rec.LeaseUntil == nil:
		v.Lease = "none"
	case rec.LeaseRunning:
		left := rec.LeaseUntil.Sub(rec.ReadAt).Round(time.Second)
		v.Lease = fmt.Sprintf("running until %s (%s left): a retry gets 409", stamp(*rec.LeaseUntil), left)
	default:
		v.Lease = fmt.Sprintf("ended at %s: a retry with the same request takes the claim over", stamp(*rec.LeaseUntil))
	}
	names := make([]string, 0, len(rec.Headers))
	for n := range rec.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, val := range rec.Headers[n] {
			v.HeaderRows = append(v.HeaderRows, [2]string{n, val})
		}
	}
	if bodyAsked && rec.Body != nil {
		v.BodyShown = true
		v.BodyIsText = rec.BodyText != "" || len(rec.Body) == 0
		v.BodyShow = rec.BodyText
		if !v.BodyIsText {
			v.BodyShow = base64.StdEncoding.EncodeToString(rec.Body)
		}
	}
	return v
}

// stamp formats a time for the page: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", "The answer could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeProblem answers an RFC 9457 problem; type is https://idemgen.dev/problems/admin/<name>.
func writeProblem(w http.ResponseWriter, status int, name, detail string) {
	b, _ := json.Marshal(map[string]any{
		"type": "https://idemgen.dev/problems/admin/" + name, "title": http.StatusText(status),
		"status": status, "detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
