package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/idemgen/idemgen/runtime/client"
)

// The one-line setup: every POST and PATCH sent through hc gets one key, kept on every attempt.
func Example() {
	var mu sync.Mutex
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if attempts++; attempts == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a deploy in progress
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	hc := &http.Client{Transport: client.New(nil)}

	resp, err := hc.Post(srv.URL+"/v1/payments", "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts, "attempts")
	// Output: 201 after 2 attempts
}

// A key that must survive a restart is made and saved before the first attempt, then sent with
// WithKeySince, so that a much later retry is refused (ReconcileError) rather than run again.
func ExampleWithKeySince() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: client.New(nil)}

	// Before the first attempt: make the key and save it, with its creation time, next to the
	// order it pays for (in the same transaction as the order, in a real program).
	key, created := client.NewKey(), time.Now()

	send := func(key string, created time.Time) error {
		ctx := client.WithKeySince(context.Background(), key, created)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount":100}`))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	fmt.Println("first run:", send(key, created))

	// After a restart, the saved key is sent again with its saved time. Had it been created a day
	// ago, it would be too old to send safely.
	err := send(key, created.Add(-25*time.Hour))
	fmt.Println("a day later, reconcile:", errors.Is(err, client.ErrReconcile))
	// Output:
	// first run: <nil>
	// a day later, reconcile: true
}
