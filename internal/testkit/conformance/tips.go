package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The tips API (testdata/specs/nulls.yaml), which every service that runs the shared cases
// serves beside the conformance API, so that testdata/cases-nulls proves through each stack that
// null is not absent: a tip created with "note": null has no note, one created without a note
// has the default note, and a merge patch (RFC 7396) whose note is null removes it. The
// business is written once, here; each stack reads the request its own way (generated types,
// or its framework's JSON binder into TipBody behind the Middleware) and calls CreateTip and
// UpdateTip.

// DefaultNote is a tip's note when the request leaves it out.
const DefaultNote = "Thank you!"

// Opt is a member of a JSON object in three states: absent (Set false), null (Null), or a
// value. encoding/json (and every binder built on it: echo's Bind, gin's ShouldBindJSON)
// calls UnmarshalJSON only for a member that is present, null included.
type Opt[T any] struct {
	Set, Null bool
	Value     T
}

// UnmarshalJSON reads null or a value.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// TipBody is a tips request body as a handler behind the Middleware binds it.
type TipBody struct {
	Amount Opt[int64]  `json:"amount"`
	Note   Opt[string] `json:"note"`
}

// tipFrom is a generated three-state member (nil absent, Null, Value) as an Opt.
func tipFrom[T any](n *canonical.Nullable[T]) Opt[T] {
	if n == nil {
		return Opt[T]{}
	}
	return Opt[T]{Set: true, Null: n.Null, Value: n.Value}
}

// Tip is a tip as the API answers with it.
type Tip struct {
	ID     string  `json:"id"`
	Amount int64   `json:"amount"`
	Note   *string `json:"note"`
}

// CreateTip is POST /v1/tips for tenant, written through db: 201 and the tip. An absent note is
// DefaultNote, a null note none. The answer is a final 400 when the amount is missing.
func CreateTip(ctx context.Context, db pgstore.DBTX, tenant string, b TipBody) (int, any, error) {
	if !b.Amount.Set || b.Amount.Null || b.Amount.Value < 1 {
		return http.StatusBadRequest, problemDoc("tip-invalid", "a tip needs an amount of at least 1"), nil
	}
	t := Tip{ID: "tip_" + uuid.NewString(), Amount: b.Amount.Value}
	switch {
	case !b.Note.Set:
		n := DefaultNote
		t.Note = &n
	case !b.Note.Null:
		t.Note = &b.Note.Value
	}
	if _, err := db.Exec(ctx, `INSERT INTO tips (id, tenant, amount, note) VALUES ($1, $2, $3, $4)`, t.ID, tenant, t.Amount, t.Note); err != nil {
		return 0, nil, fmt.Errorf("insert tip: %w", err)
	}
	return http.StatusCreated, t, nil
}

// UpdateTip is PATCH /v1/tips/{tip_id}, a JSON merge patch: an absent member leaves the field,
// a null note removes the note, a value sets it. It records the update in tip_updates (the
// effect the cases count), and answers 200 and the tip, or a final 404.
func UpdateTip(ctx context.Context, db pgstore.DBTX, tenant, id string, b TipBody) (int, any, error) {
	var t Tip
	err := db.QueryRow(ctx, `SELECT id, amount, note FROM tips WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&t.ID, &t.Amount, &t.Note)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return http.StatusNotFound, problemDoc("tip-not-found", "no tip "+id), nil
	case err != nil:
		return 0, nil, fmt.Errorf("read tip: %w", err)
	}
	if b.Amount.Set {
		if b.Amount.Null {
			return http.StatusBadRequest, problemDoc("tip-invalid", "a tip's amount cannot be removed"), nil
		}
		t.Amount = b.Amount.Value
	}
	switch {
	case b.Note.Set && b.Note.Null:
		t.Note = nil
	case b.Note.Set:
		t.Note = &b.Note.Value
	}
	if _, err := db.Exec(ctx, `UPDATE tips SET amount = $3, note = $4 WHERE tenant = $1 AND id = $2`, tenant, id, t.Amount, t.Note); err != nil {
		return 0, nil, fmt.Errorf("update tip: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO tip_updates (tenant, tip_id, note_cleared) VALUES ($1, $2, $3)`, tenant, id, b.Note.Set && b.Note.Null); err != nil {
		return 0, nil, fmt.Errorf("record tip update: %w", err)
	}
	return http.StatusOK, t, nil
}

// TipHandlers are the tips API's generated business functions (package golden/nulls) over
// CreateTip and UpdateTip: what a user writes for generated handlers.
func TipHandlers() nulls.Handlers {
	return nulls.Handlers{
		CreateTip: func(ctx context.Context, tx pgstore.DBTX, _ nulls.CreateTipParams, b nulls.CreateTipBody) (runtime.Response, error) {
			return tipAnswer(CreateTip(ctx, tx, knobsFrom(ctx).tenant, TipBody{Amount: Opt[int64]{Set: true, Value: b.Amount}, Note: tipFrom(b.Note)}))
		},
		UpdateTip: func(ctx context.Context, tx pgstore.DBTX, p nulls.UpdateTipParams, b nulls.UpdateTipBody) (runtime.Response, error) {
			return tipAnswer(UpdateTip(ctx, tx, knobsFrom(ctx).tenant, p.TipID, TipBody{Amount: tipFrom(b.Amount), Note: tipFrom(b.Note)}))
		},
	}
}

// TipsHTTP are the tips API's handlers for a service behind the Middleware, with the standard
// library's JSON decoder reading the body (the bytes the Middleware fingerprinted, re-encoded:
// null stays null) and the transaction taken from the request's context. A framework's own
// handler binds TipBody with its binder instead, and calls CreateTip and UpdateTip.
func TipsHTTP() (create, update http.Handler) {
	handle := func(w http.ResponseWriter, r *http.Request, run func(ctx context.Context, tx pgstore.DBTX, tenant string, b TipBody) (int, any, error)) {
		tx, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, "no idempotency transaction: is the Middleware in front of this route?", http.StatusInternalServerError)
			return
		}
		var b TipBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			WriteTip(w, http.StatusBadRequest, problemDoc("tip-invalid", err.Error()))
			return
		}
		status, doc, err := run(r.Context(), tx, knobsFrom(r.Context()).tenant, b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		WriteTip(w, status, doc)
	}
	create = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, CreateTip) })
	update = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("tip_id")
		if id == "" {
			id = lastSegment(r.URL.Path)
		}
		handle(w, r, func(ctx context.Context, tx pgstore.DBTX, tenant string, b TipBody) (int, any, error) {
			return UpdateTip(ctx, tx, tenant, id, b)
		})
	})
	return create, update
}

// GetTip is GET /v1/tips/{tip_id} (unmarked): the tenant's tip, or 404.
func GetTip(tables Tables) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The tenant from the request itself: a framework's bridge to net/http (fiber's
		// adaptor) may not carry the context the knobs were put in.
		tenant, _ := tenantOf(r)
		var t Tip
		err := tables.QueryRow(r.Context(), `SELECT id, amount, note FROM tips WHERE tenant = $1 AND id = $2`,
			tenant, lastSegment(r.URL.Path)).Scan(&t.ID, &t.Amount, &t.Note)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			WriteTip(w, http.StatusNotFound, problemDoc("tip-not-found", "no such tip"))
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			WriteTip(w, http.StatusOK, t)
		}
	})
}

// WriteTip writes a tips answer: the tip as JSON, or a refusal as problem+json.
func WriteTip(w http.ResponseWriter, status int, doc any) {
	ct, b := TipAnswer(status, doc)
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// TipAnswer is a tips answer's media type and body, for a framework that writes its own.
func TipAnswer(status int, doc any) (contentType string, body []byte) {
	contentType = "application/json"
	if status >= 400 {
		contentType = "application/problem+json"
	}
	body, _ = json.Marshal(doc)
	return contentType, body
}

// tipAnswer is a business answer as a generated handler returns it.
func tipAnswer(status int, doc any, err error) (runtime.Response, error) {
	if err != nil {
		return runtime.Response{}, err
	}
	resp, err := runtime.JSON(status, doc)
	if status >= 400 {
		resp.Header.Set("Content-Type", "application/problem+json")
	}
	return resp, err
}

// problemDoc is a refusal of the tips API (RFC 9457).
func problemDoc(name, detail string) map[string]any {
	return map[string]any{"type": "https://conformance.example/problems/" + name, "title": name, "detail": detail}
}

// lastSegment is the last segment of a path (the tip id of /v1/tips/{tip_id}), whatever the
// router: chi, echo and gin do not set Request.PathValue.
func lastSegment(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}
