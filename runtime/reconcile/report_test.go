package reconcile

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, report string, f Format, cols Columns, decimal bool) ([]Line, error) {
	t.Helper()
	rd, err := open(strings.NewReader(report), f, cols, 0, decimal)
	if err != nil {
		return nil, err
	}
	var out []Line
	for {
		l, err := rd.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
}

const pk1 = "8d23cf6c86e834a7aa6eded54c26ce2bb2e74903538c61bdd5d2197997ab2f72"

func TestReportCSVAndJSONLines(t *testing.T) {
	want := Line{ProviderKey: pk1, Status: "succeeded", Amount: 1250, HasAmount: true, Currency: "EUR",
		Time: time.Date(2026, 11, 2, 10, 30, 0, 0, time.UTC)}
	for name, tc := range map[string]struct {
		report string
		format Format
		line   int
	}{
		"csv":                    {"\xEF\xBB\xBFid,Idempotency_Key,amount,currency,status,created\nch_1," + pk1 + ",1250,eur, succeeded ,2026-11-02T10:30:00Z\n", Detect, 2},
		"csv-quoted":             {"idempotency_key,amount,currency,status,created\n\"" + pk1 + "\",\"1250\",EUR,succeeded,\"2026-11-02 10:30:00\"\n", CSV, 2},
		"jsonl":                  {"\n{\"idempotency_key\":\"" + pk1 + "\",\"amount\":1250,\"currency\":\"eur\",\"status\":\"succeeded\",\"created\":1793615400}\n", Detect, 2},
		"jsonl-no-final-newline": {"{\"idempotency_key\":\"" + pk1 + "\",\"amount\":\"1250\",\"currency\":\"EUR\",\"status\":\"succeeded\",\"created\":\"2026-11-02T11:30:00+01:00\"}", JSONLines, 1},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(t, tc.report, tc.format, DefaultColumns, false)
			if err != nil || len(got) != 1 {
				t.Fatalf("%d lines, %v", len(got), err)
			}
			l := got[0]
			if l.ProviderKey != want.ProviderKey || l.Status != want.Status || l.Amount != want.Amount || !l.HasAmount ||
				l.Currency != want.Currency || !l.Time.Equal(want.Time) || l.Number != tc.line {
				t.Errorf("line %+v, want %+v at line %d", l, want, tc.line)
			}
			if js := string(l.JSON()); !strings.Contains(js, pk1) || !strings.HasPrefix(js, "{") {
				t.Errorf("JSON() = %s", js)
			}
		})
	}
}

func TestReportPointersAndMissingColumns(t *testing.T) {
	cols := Columns{Key: "/metadata/idempotency_key", Status: "outcome", Amount: "/amount/value", Currency: "/amount/currency"}
	got, err := readAll(t, `{"metadata":{"idempotency_key":"`+pk1+`"},"outcome":"captured","amount":{"value":"12.50","currency":"EUR"}}`+"\n", JSONLines, cols, true)
	if err != nil || len(got) != 1 || got[0].Amount != 1250 || got[0].Status != "captured" || got[0].ProviderKey != pk1 {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := readAll(t, "key,status\nx,paid\n", CSV, DefaultColumns, false); err == nil || !strings.Contains(err.Error(), `no column "idempotency_key"`) {
		t.Errorf("missing CSV column: %v", err)
	}
	if _, err := readAll(t, "", CSV, DefaultColumns, false); err == nil {
		t.Error("an empty CSV report must be an error (no header)")
	}
}

func TestReportLineErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		report, want string
		decimal      bool
	}{
		"amount":       {"idempotency_key,amount,currency,status,created\n" + pk1 + ",12.5,EUR,paid,\n", `report line 2, amount: "12.5" is not an integer amount`, false},
		"decimals":     {"idempotency_key,amount,currency,status,created\n" + pk1 + ",12.501,EUR,paid,\n", `report line 2, amount: "12.501" has more decimals than EUR's 2`, true},
		"time":         {"idempotency_key,amount,currency,status,created\n" + pk1 + ",1,EUR,paid,yesterday\n", `report line 2, created: "yesterday" is not a time`, false},
		"quote":        {"idempotency_key,amount,currency,status,created\n\"" + pk1 + ",1,EUR,paid,\n", `report line 2:`, false},
		"json":         {"{\"idempotency_key\":1}\n{nope\n", `report line 2: not a JSON object`, false},
		"json-object":  {"{\"idempotency_key\":{\"a\":1},\"status\":\"paid\"}\n", `report line 1, idempotency_key: an object or an array`, false},
		"json-two":     {"{\"status\":\"paid\"} {\"status\":\"paid\"}\n", `report line 1: more than one JSON value`, false},
		"yen-decimals": {"idempotency_key,amount,currency,status,created\n" + pk1 + ",1250.5,JPY,paid,\n", `"1250.5" has more decimals than JPY's 0`, true},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readAll(t, tc.report, Detect, DefaultColumns, tc.decimal)
			var le *LineError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &le) {
				t.Errorf("error %v, want a *LineError containing %q", err, tc.want)
			}
		})
	}
}

func TestParseAmountAndTime(t *testing.T) {
	for _, tc := range []struct {
		s, cur string
		want   int64
	}{{"12.5", "EUR", 1250}, {"12", "EUR", 1200}, {"-3.10", "USD", -310}, {"1250", "JPY", 1250}, {"1.234", "KWD", 1234}, {"0.50", "EUR", 50}} {
		if got, err := parseAmount(tc.s, tc.cur, true); err != nil || got != tc.want {
			t.Errorf("parseAmount(%q, %s) = %d, %v; want %d", tc.s, tc.cur, got, err, tc.want)
		}
	}
	for _, s := range []string{"1e3", "", ".5", "1.2.3", "+1"} {
		if _, err := parseAmount(s, "EUR", true); err == nil {
			t.Errorf("parseAmount(%q) accepted", s)
		}
	}
	ms, err := parseTime("1793615400123")
	if err != nil || ms.UnixMilli() != 1793615400123 {
		t.Errorf("milliseconds: %v, %v", ms, err)
	}
	frac, err := parseTime("1793615400.5")
	if err != nil || frac.UnixMilli() != 1793615400500 {
		t.Errorf("fractional seconds: %v, %v", frac, err)
	}
}

// prefixOf reads the first 128 bits of a provider key in any case, and refuses anything that is
// not 64 hex digits.
func TestKeyPrefix(t *testing.T) {
	p, ok := prefixOf(pk1)
	up, okUp := prefixOf(strings.ToUpper(pk1))
	if !ok || !okUp || p != up || p != (keyPrefix{0x8d23cf6c86e834a7, 0xaa6eded54c26ce2b}) {
		t.Fatalf("prefixOf(%s) = %x %v, upper %x %v", pk1, p, ok, up, okUp)
	}
	for _, bad := range []string{"", pk1[:63], pk1 + "0", pk1[:63] + "g", "ch_1"} {
		if _, ok := prefixOf(bad); ok {
			t.Errorf("prefixOf(%q) accepted", bad)
		}
	}
	if k, _, ok := parseKey(strings.ToUpper(pk1)); !ok || k != pk1 {
		t.Errorf("parseKey of the upper-case key: %q %v", k, ok)
	}
}
