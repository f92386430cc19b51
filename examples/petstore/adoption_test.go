package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func getAdoption(t *testing.T, c *http.Client, url, client string) (int, adoption) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("api_key", client)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a adoption
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
	}
	return resp.StatusCode, a
}

// The long operation end to end: 202 with the status URL at once, the status resource moving
// through the worker's steps with growing progress, a retry replaying the 202 (not the current
// state), and the pet sold at the end.
func TestAdoptionProgress(t *testing.T) {
	opts := options{adoptionStep: 150 * time.Millisecond, jobPoll: 10 * time.Millisecond}
	srv, pool := petstore(t, opts)
	petID := addPet(t, srv, "pet-key-adopt-000000001")
	const key = "adopt-key-progress-00001"
	body := `{"adopter": "Ada Lovelace"}`
	first := mustPost(t, srv.Client(), srv.URL+"/pet/"+itoa(petID)+"/adoptions", key, body)
	loc := first.header.Get("Location")
	if first.status != http.StatusAccepted || !strings.HasPrefix(loc, "/adoptions/") || !strings.Contains(string(first.body), `"status":"queued"`) {
		t.Fatalf("adoptPet: %d %v %s", first.status, first.header, first.body)
	}
	if _, a := getAdoption(t, srv.Client(), srv.URL+loc, "test-client"); a.Status != adoptionQueued || a.Progress != 0 {
		t.Errorf("before the worker: %+v", a)
	}
	if status, _ := getAdoption(t, srv.Client(), srv.URL+loc, "another-client"); status != http.StatusNotFound {
		t.Errorf("another client reads the adoption: %d", status)
	}

	startWorker(t, pool, opts)
	var seen []int32
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, a := getAdoption(t, srv.Client(), srv.URL+loc, "test-client")
		if len(seen) == 0 || seen[len(seen)-1] != a.Progress {
			seen = append(seen, a.Progress)
		}
		if a.Status == adoptionApproved {
			if a.CompletedAt == nil || a.Step != "done" {
				t.Errorf("approved adoption: %+v", a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adoption never finished; progress seen %v", seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 0 (queued), then one value per step, then 100.
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("progress went back: %v", seen)
		}
	}
	if len(seen) < 3 || seen[len(seen)-1] != 100 {
		t.Errorf("progress seen %v, want steps between 0 and 100", seen)
	}

	retry := mustPost(t, srv.Client(), srv.URL+"/pet/"+itoa(petID)+"/adoptions", key, body)
	if retry.status != http.StatusAccepted || retry.header.Get("Idempotent-Replayed") != "true" ||
		retry.header.Get("Location") != loc || string(retry.body) != string(first.body) {
		t.Errorf("retry after the job: %d %v %s", retry.status, retry.header, retry.body)
	}
	var petStatus string
	var jobs int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT status FROM pets WHERE id = $1), (SELECT count(*) FROM adoption_jobs)`, petID).Scan(&petStatus, &jobs); err != nil {
		t.Fatal(err)
	}
	if petStatus != "sold" || jobs != 1 {
		t.Errorf("pet %q, %d jobs; want sold and one job", petStatus, jobs)
	}
}

// Prefer: wait=N long-polls the status resource until the adoption finishes.
func TestAdoptionStatusLongPoll(t *testing.T) {
	if got := preferWait([]string{`respond-async, wait=5`}); got != 5*time.Second {
		t.Errorf("wait=5: %v", got)
	}
	if got := preferWait([]string{`wait=3600`}); got != maxWait {
		t.Errorf("wait=3600: %v, want the cap", got)
	}
	if got := preferWait([]string{`handling=lenient`, `wait=x`}); got != 0 {
		t.Errorf("no usable wait: %v", got)
	}
}

// A worker that stalls past its job's lease loses the job: another worker takes it over (the
// claim's attempts is the fencing token), finishes it once, and the stalled worker's next write
// is refused.
func TestAdoptionJobTakenOver(t *testing.T) {
	srv, pool := petstore(t, options{})
	petID := addPet(t, srv, "pet-key-takeover-00001")
	a := mustPost(t, srv.Client(), srv.URL+"/pet/"+itoa(petID)+"/adoptions", "adopt-key-takeover-00001", `{"adopter": "Ada"}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("adoptPet: %d %s", a.status, a.body)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stalled := &worker{pool: pool, poll: time.Hour, step: 1200 * time.Millisecond, lease: 200 * time.Millisecond, log: quiet}
	errc := make(chan error, 1)
	go func() {
		_, err := stalled.runOne(context.Background())
		errc <- err
	}()
	// Wait until the stalled worker holds the job and its lease has ended.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var expired bool
		err := pool.QueryRow(context.Background(), `SELECT COALESCE(bool_and(attempts = 1 AND locked_until <= now()), false) FROM adoption_jobs`).Scan(&expired)
		if err != nil {
			t.Fatal(err)
		}
		if expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled worker never claimed the job")
		}
	}
	fresh := &worker{pool: pool, poll: time.Hour, step: time.Millisecond, lease: time.Minute, log: quiet}
	if did, err := fresh.runOne(context.Background()); !did || err != nil {
		t.Fatalf("the second worker: did %v, %v", did, err)
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("the stalled worker: %v, want its job taken over", err)
	}
	var attempts int
	var status string
	if err := pool.QueryRow(context.Background(), `SELECT j.attempts, a.status FROM adoption_jobs j JOIN adoptions a ON a.id = j.adoption_id`).Scan(&attempts, &status); err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || status != adoptionApproved {
		t.Errorf("attempts %d, status %q", attempts, status)
	}
}
