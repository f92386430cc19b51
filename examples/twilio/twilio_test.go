package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twilio/twilio-go/client"
	twilioapi "github.com/twilio/twilio-go/rest/api/v2010"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

const (
	accountSid = "AC0123456789abcdef0123456789abcdef"
	callSid    = "CA0123456789abcdef0123456789abcdef"
)

// env is a server generated from Twilio's spec on a fresh database, behind a fault proxy, and
// twilio-go pointed at it.
type env struct {
	pool  *pgxpool.Pool
	proxy *faultProxy
	api   *twilioapi.ApiService
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	pool := pgtest.NewPool(t, 8)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := newFaultProxy(srv.URL)
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	u, _ := url.Parse(front.URL)
	// twilio-go's client.Client, as twilio.NewRestClient builds it, with its requests for
	// https://api.twilio.com sent to the proxy; the v2010 API service alone, because the SDK's
	// RestClient of every product takes minutes to build on a loaded CI machine.
	c := &client.Client{
		Credentials: client.NewCredentials(accountSid, "authtoken0123456789"),
		HTTPClient:  &http.Client{Timeout: 30 * time.Second, Transport: toProxy{u, &http.Transport{}}},
	}
	c.SetAccountSid(accountSid)
	return &env{pool: pool, proxy: p, api: twilioapi.NewApiServiceWithClient(c)}
}

func payment(key string, amount float32) *twilioapi.CreatePaymentsParams {
	return (&twilioapi.CreatePaymentsParams{}).SetIdempotencyKey(key).
		SetStatusCallback("https://shop.example/payments").SetChargeAmount(amount).SetCurrency("USD")
}

// rows counts the payment sessions started: the effects that happened.
func (e *env) rows(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// errorSchema is the schema idemgen.yaml's errors mapping writes for Twilio's errors.
func errorSchema(t *testing.T) *spec.Schema {
	t.Helper()
	src, err := os.ReadFile("idemgen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Defaults struct {
			Errors struct {
				Formats []struct {
					Schema yaml.Node `yaml:"schema"`
				} `yaml:"formats"`
			} `yaml:"errors"`
		} `yaml:"defaults"`
	}
	if err := yaml.Unmarshal(src, &cfg); err != nil || len(cfg.Defaults.Errors.Formats) != 1 {
		t.Fatalf("idemgen.yaml: %v, want one error format", err)
	}
	out, err := yaml.Marshal(&cfg.Defaults.Errors.Formats[0].Schema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.ParseSchema(out)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restError checks that err is twilio-go's TwilioRestError for an answer of status: its Status,
// Code, Message and MoreInfo those of the document the server sent with that status, which
// follows the schema of idemgen.yaml (no member more).
func (e *env) restError(t *testing.T, err error, status, code int) *client.TwilioRestError {
	t.Helper()
	var re *client.TwilioRestError
	if !errors.As(err, &re) {
		t.Fatalf("want a *client.TwilioRestError, got %T: %v", err, err)
	}
	t.Logf("twilio-go: %v", err)
	var last *attempt
	for _, a := range e.proxy.seen() {
		if a.status == status {
			last = a
		}
	}
	if last == nil {
		t.Fatalf("the server answered no %d", status)
	}
	if err := errorSchema(t).Validate(last.body, true); err != nil {
		t.Errorf("the %d document %s is not in the mapping's schema: %v", status, last.body, err)
	}
	if re.Status != status || re.Code != code || re.Message == "" ||
		re.MoreInfo != "https://www.twilio.com/docs/errors/"+strconv.Itoa(code) || !strings.Contains(string(last.body), re.Message) {
		t.Errorf("TwilioRestError %+v, want status %d, code %d and the server's message (%s)", re, status, code, last.body)
	}
	return re
}

// twilio-go gets the API's own errors, in the shape Twilio's SDKs read, for every refusal the
// idempotency layer makes: a *client.TwilioRestError whose Status, Code, Message and MoreInfo are
// those the server sent, with the problem's detail as the message. No error is written by hand:
// the server's writer is generated from idemgen.yaml's errors mapping.
func TestTwilioGo(t *testing.T) {
	t.Run("201, an answer lost, the retry replayed", func(t *testing.T) {
		e := newEnv(t, Options{})
		e.proxy.dropAnswers(0)
		if _, err := e.api.CreatePayments(callSid, payment("pay-0001", 12)); err == nil {
			t.Fatal("the first answer was dropped: want an error")
		}
		// twilio-go does not retry; the application does, with the same IdempotencyKey.
		got, err := e.api.CreatePaymentsWithMetadata(callSid, payment("pay-0001", 12))
		if err != nil {
			t.Fatal(err)
		}
		as := e.proxy.seen()
		if len(as) != 2 || as[0].status != 201 || !as[0].dropped || got.GetStatusCode() != 201 ||
			got.GetHeaders().Get("Idempotent-Replayed") != "true" || got.GetHeaders().Get("Idempotency-Key-Expires") == "" || got.Resource.Sid == nil || !strings.HasPrefix(*got.Resource.Sid, "PK") {
			t.Errorf("attempts %d, replay %d %v %+v", len(as), got.GetStatusCode(), got.GetHeaders(), got.Resource)
		}
		if n := e.rows(t); n != 1 {
			t.Errorf("%d payment sessions started, want 1", n)
		}
	})

	t.Run("400 key-invalid", func(t *testing.T) {
		e := newEnv(t, Options{})
		_, err := e.api.CreatePayments(callSid, payment(strings.Repeat("k", 300), 12))
		re := e.restError(t, err, 400, 20001)
		if !strings.Contains(re.Message, "255") {
			t.Errorf("message %q does not say the limit", re.Message)
		}
	})

	t.Run("400 body-invalid", func(t *testing.T) {
		e := newEnv(t, Options{})
		p := payment("pay-0400", 12)
		p.StatusCallback = nil // required by Twilio's spec
		_, err := e.api.CreatePayments(callSid, p)
		re := e.restError(t, err, 400, 20001)
		if !strings.Contains(re.Message, "StatusCallback") {
			t.Errorf("message %q does not name the field", re.Message)
		}
	})

	t.Run("409 in-flight", func(t *testing.T) {
		e := newEnv(t, Options{Delay: 3 * time.Second})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				if i == 1 {
					time.Sleep(500 * time.Millisecond) // the first holds the key
				}
				_, errs[i] = e.api.CreatePayments(callSid, payment("pay-0409", 12))
			})
		}
		wg.Wait()
		if errs[0] != nil {
			t.Fatalf("the first: %v", errs[0])
		}
		e.restError(t, errs[1], 409, 20409)
		if n := e.rows(t); n != 1 {
			t.Errorf("%d payment sessions started, want 1", n)
		}
	})

	t.Run("422 payload-mismatch", func(t *testing.T) {
		e := newEnv(t, Options{})
		if _, err := e.api.CreatePayments(callSid, payment("pay-0422", 12)); err != nil {
			t.Fatal(err)
		}
		_, err := e.api.CreatePayments(callSid, payment("pay-0422", 13))
		e.restError(t, err, 422, 20422)
		if n := e.rows(t); n != 1 {
			t.Errorf("%d payment sessions started, want 1", n)
		}
	})

	t.Run("429 rate-limited", func(t *testing.T) {
		e := newEnv(t, Options{Limits: pgstoreLimits(1)})
		if _, err := e.api.CreatePayments(callSid, payment("pay-0001", 12)); err != nil {
			t.Fatal(err)
		}
		_, err := e.api.CreatePayments(callSid, payment("pay-0002", 12))
		e.restError(t, err, 429, 20429)
		if ra := e.proxy.seen()[1].header.Get("Retry-After"); ra == "" {
			t.Error("429 without Retry-After")
		}
	})

	t.Run("503 store-unavailable", func(t *testing.T) {
		e := newEnv(t, Options{})
		e.pool.Close() // the store cannot be reached: nothing runs
		_, err := e.api.CreatePayments(callSid, payment("pay-0503", 12))
		e.restError(t, err, 503, 20503)
	})
}
