package conformance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// TestChargeStoresBracketedFields: createCharge stores what the bracketed form fields decoded
// to: the metadata map, the items in index order and the shipping object, "" for a field sent
// empty to unset it, NULL for one left out.
func TestChargeStoresBracketedFields(t *testing.T) {
	s := newFailureService(t, conformancetest.PGStore(pgstore.Options{}))
	form := func(key, body string) answer {
		req, _ := http.NewRequest("POST", s.url+"/v1/charges", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer stores")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return answer{status: resp.StatusCode}
	}
	for key, body := range map[string]string{
		"k-stores-bracketed-1": "amount=1&currency=usd&items[1][price]=p_B&metadata%5Border%5D=7&items[0][price]=p_A&items[0][quantity]=2&shipping[name]=Ada&shipping[address][city]=Paris",
		"k-stores-bracketed-2": "amount=2&currency=usd&metadata=&shipping=",
		"k-stores-bracketed-3": "amount=3&currency=usd",
	} {
		if a := form(key, body); a.status != 201 {
			t.Fatalf("%s: %v", body, a)
		}
	}
	rows, err := s.pool.Query(context.Background(),
		`SELECT amount, coalesce(metadata::text, 'NULL'), coalesce(items::text, 'NULL'), coalesce(shipping::text, 'NULL') FROM charges WHERE tenant = 'stores' ORDER BY amount`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var amount int64
		var m, i, sh string
		if err := rows.Scan(&amount, &m, &i, &sh); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{m, i, sh}, " | "))
	}
	want := []string{
		`{"order": "7"} | [{"price": "p_A", "quantity": 2}, {"price": "p_B"}] | {"name": "Ada", "address": {"city": "Paris"}}`,
		`"" | NULL | ""`,
		`NULL | NULL | NULL`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stored\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
