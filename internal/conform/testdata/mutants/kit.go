// Package mutants is a corpus of small payment servers (payments.yaml), each guarding its two
// operations with an idempotency layer written by hand, the way teams write one, with one
// classic bug; good.go is the same layer without the bug. idemgen conform must fail every
// mutant and name the check that catches its bug, and pass the good one.
//
// This file is what the servers share and what is not under test: the business handlers (a
// payment writes one effect, inside the "transaction" the layer commits), tenants, test knobs,
// key rules, the canonical fingerprint and the response recorder. Each other file is one
// layer, a few dozen lines.
package mutants

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mutant is one server of the corpus.
type Mutant struct {
	// Name is the file's name; Bug says what is wrong, in a line.
	Name, Bug string
	// Caught is the conform check that must fail (internal/conform's Check name).
	Caught string
	// Layer is the idempotency layer; Outside puts it around the whole router instead of
	// around each operation.
	Layer   func(*Kit) func(http.Handler) http.Handler
	Outside bool
}

// Kit is one running server's state: its records and its effects.
type Kit struct {
	mu      sync.Mutex
	records map[string]*Record
	// effects counts committed business effects; the effects oracle of the tests reads it.
	effects atomic.Int64
	seq     atomic.Int64
}

// Record is a key's record: the request's fingerprint, whether it completed, its response.
type Record struct {
	Fingerprint string
	Done        bool
	Status      int
	Header      http.Header
	Body        []byte
	// Expires is when the stored answer stops replaying (Idempotency-Key-Expires).
	Expires time.Time
}

// New returns the server with layer m and its kit.
func New(m Mutant) (http.Handler, *Kit) {
	k := &Kit{records: map[string]*Record{}}
	mw := m.Layer(k)
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		if m.Outside {
			mux.Handle(pattern, h)
		} else {
			mux.Handle(pattern, mw(h))
		}
	}
	route("POST /v1/payments", k.createPayment)
	route("POST /v1/refunds", k.createRefund)
	if m.Outside {
		return mw(mux), k
	}
	return mux, k
}

// Effects returns the committed business effects.
func (k *Kit) Effects() int64 { return k.effects.Load() }

// Get, Put and Delete are the record store (a map under a mutex, as an in-memory or Redis
// store would be). PutIfAbsent is the atomic claim: it stores r unless the key has a record,
// and returns the record that is there.
func (k *Kit) Get(key string) *Record {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.records[key]
}

func (k *Kit) Put(key string, r *Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.records[key] = r
}

func (k *Kit) PutIfAbsent(key string, r *Record) (*Record, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.records[key]; ok {
		return old, false
	}
	k.records[key] = r
	return r, true
}

func (k *Kit) Delete(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.records, key)
}

// Tenant is the bearer token of Authorization.
func Tenant(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// KeyProblem checks the Idempotency-Key header by the spec's default rules (16 to 255
// visible ASCII characters but the comma, one header line); "" when it is valid.
func KeyProblem(r *http.Request) (key string, status int, problem string) {
	lines := r.Header.Values("Idempotency-Key")
	switch {
	case len(lines) == 0 || lines[0] == "":
		return "", http.StatusBadRequest, "key-missing"
	case len(lines) > 1:
		return "", http.StatusBadRequest, "key-invalid"
	}
	key = lines[0]
	if len(key) < 16 || len(key) > 255 {
		return "", http.StatusBadRequest, "key-invalid"
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e || c == ',' {
			return "", http.StatusBadRequest, "key-invalid"
		}
	}
	return key, 0, ""
}

// Problem writes an RFC 9457 problem.
func Problem(w http.ResponseWriter, status int, name string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"https://example.com/problems/%s","title":%q,"status":%d}`, name, name, status)
}

// ReadBody reads the request body and puts it back for the handler.
func ReadBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// Canonical is the fingerprint of a JSON body: its canonical form (members sorted, numbers
// by value, no whitespace), with the path. A member named twice is an error when strict, or
// keeps its first value when not (what a hand-written token walk easily does).
func Canonical(path string, body []byte, strict bool) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var b strings.Builder
	if err := canon(dec, &b, strict); err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("trailing data")
	}
	sum := sha256.Sum256([]byte(path + "\n" + b.String()))
	return fmt.Sprintf("%x", sum), nil
}

func canon(dec *json.Decoder, b *strings.Builder, strict bool) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		if v == '[' {
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				if err := canon(dec, b, strict); err != nil {
					return err
				}
			}
			dec.Token()
			b.WriteByte(']')
			return nil
		}
		members := map[string]string{}
		for dec.More() {
			kt, _ := dec.Token()
			name := kt.(string)
			var mb strings.Builder
			if err := canon(dec, &mb, strict); err != nil {
				return err
			}
			if _, dup := members[name]; dup {
				if strict {
					return fmt.Errorf("member %q twice", name)
				}
				continue
			}
			members[name] = mb.String()
		}
		dec.Token()
		names := make([]string, 0, len(members))
		for n := range members {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteByte('{')
		for i, n := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(n)
			b.Write(q)
			b.WriteByte(':')
			b.WriteString(members[n])
		}
		b.WriteByte('}')
	case json.Number:
		f, _, err := big.ParseFloat(string(v), 10, 256, big.ToNearestEven)
		if err != nil {
			return err
		}
		b.WriteString(f.Text('g', 40))
	default:
		q, _ := json.Marshal(v)
		b.Write(q)
	}
	return nil
}

// Recorder captures the handler's response.
type Recorder struct {
	Status int
	header http.Header
	Body   bytes.Buffer
}

func NewRecorder() *Recorder { return &Recorder{header: http.Header{}} }

func (r *Recorder) Header() http.Header { return r.header }
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.Body.Write(b)
}
func (r *Recorder) WriteHeader(s int) {
	if r.Status == 0 {
		r.Status = s
	}
}

// Record turns the captured response into a record of fingerprint fp.
func (r *Recorder) Record(fp string) *Record {
	h := http.Header{}
	for _, name := range []string{"Content-Type", "Location"} {
		if v := r.header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	rec := &Record{Fingerprint: fp, Done: true, Status: r.Status, Header: h, Body: r.Body.Bytes(), Expires: time.Now().Add(Retention)}
	r.header.Set(ExpiresHeader, rec.Expires.UTC().Format(http.TimeFormat))
	return rec
}

// Retention is how long a stored answer replays; ExpiresHeader says until when, on the stored
// answer and its replays.
const (
	Retention     = 24 * time.Hour
	ExpiresHeader = "Idempotency-Key-Expires"
)

// Replay writes a stored response, marked as a replay.
func Replay(w http.ResponseWriter, rec *Record) {
	for k, vs := range rec.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.Header().Set(ExpiresHeader, rec.Expires.UTC().Format(http.TimeFormat))
	w.WriteHeader(rec.Status)
	w.Write(rec.Body)
}

// Send writes a captured response as is.
func Send(w http.ResponseWriter, r *Recorder) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.Status)
	w.Write(r.Body.Bytes())
}

// Tx is the business transaction of one request: its effects count only once the layer
// commits it (with the record, in a layer that gets it right).
type Tx struct {
	k       *Kit
	pending int64
}

type txKey struct{}

// Begin attaches a transaction to the request.
func (k *Kit) Begin(r *http.Request) (*Tx, *http.Request) {
	tx := &Tx{k: k}
	return tx, r.WithContext(context.WithValue(r.Context(), txKey{}, tx))
}

// Commit makes the transaction's effects count; Rollback drops them.
func (tx *Tx) Commit()   { tx.k.effects.Add(tx.pending); tx.pending = 0 }
func (tx *Tx) Rollback() { tx.pending = 0 }

// write records one business effect: in the request's transaction when the layer began one,
// at once otherwise.
func (k *Kit) write(r *http.Request) {
	if tx, ok := r.Context().Value(txKey{}).(*Tx); ok {
		tx.pending++
		return
	}
	k.effects.Add(1)
}

// work is what both handlers do first: honour the delay knob.
func work(r *http.Request) {
	if d, err := time.ParseDuration(r.Header.Get("X-Test-Delay")); err == nil && d > 0 {
		time.Sleep(d)
	}
}

// failKnob reports whether the request asks the handler to fail after its work.
func failKnob(r *http.Request) bool { return r.Header.Get("X-Test-Fail") == "500" }

// decode reads the body as encoding/json does (the last of a member named twice wins), with
// numbers by value.
func decode(r *http.Request) (map[string]any, error) {
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return 0, false
	}
	i, acc := f.Int64()
	return i, acc == big.Exact
}

func (k *Kit) createPayment(w http.ResponseWriter, r *http.Request) {
	work(r)
	m, err := decode(r)
	amount, ok := integer(m["amount"])
	currency, _ := m["currency"].(string)
	if err != nil || !ok || amount < 1 || amount > 1000000 || (currency != "EUR" && currency != "USD") {
		Problem(w, http.StatusBadRequest, "body-invalid")
		return
	}
	k.write(r)
	if failKnob(r) {
		Problem(w, http.StatusInternalServerError, "internal")
		return
	}
	id := "pay_" + strconv.FormatInt(k.seq.Add(1), 10)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/v1/payments/"+id)
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%q,"amount":%d,"currency":%q}`, id, amount, currency)
}

func (k *Kit) createRefund(w http.ResponseWriter, r *http.Request) {
	work(r)
	m, err := decode(r)
	amount, ok := integer(m["amount"])
	payment, _ := m["payment"].(string)
	if err != nil || !ok || amount < 1 || payment == "" {
		Problem(w, http.StatusBadRequest, "body-invalid")
		return
	}
	k.write(r)
	if failKnob(r) {
		Problem(w, http.StatusInternalServerError, "internal")
		return
	}
	id := "re_" + strconv.FormatInt(k.seq.Add(1), 10)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%q,"payment":%q,"amount":%d}`, id, payment, amount)
}
