package patterns

// The generated decoders check ECMA-262 patterns: RE2 runs the ones it compiles, the ECMAScript
// engine (regexp2) the ones with lookaround; both refuse the same values where the patterns
// say the same (createTransfer and createTransferEcma), and the lookaheads refuse what only
// they can express.

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/gen"
)

// transferBody is a pattern-heavy body both operations accept: every field has a pattern.
const transferBody = `{"currency":"EUR","iban":"NL91ABNA0417164300","bic":"ABNANL2AXXX","email":"ap@example.com",` +
	`"reference":"Invoice 2024/07 (part 1)","amount":"1250.00","country":"NL","postal_code":"1012 AB",` +
	`"phone":"+31201234567","external_id":"inv_8f3a9c2e41b7","execution_date":"2026-12-01",` +
	`"description":"Rent for December","tags":["rent","office","monthly"]}`

func decode(op, body string) error {
	r := httptest.NewRequest("POST", "/transfers", nil)
	var err error
	switch op {
	case "re2":
		_, _, err = fptest.Decode(operationCreateTransfer(), decodeCreateTransfer, r, "application/json", []byte(body))
	default:
		_, _, err = fptest.Decode(operationCreateTransferEcma(), decodeCreateTransferEcma, r, "application/json", []byte(body))
	}
	return err
}

func TestPatternsOnBothEngines(t *testing.T) {
	for _, tt := range []struct {
		name, from, to, at string // replace from by to in transferBody; "" at: accepted
	}{
		{"valid", "", "", ""},
		{"currency", `"EUR"`, `"eur"`, "/currency"},
		{"iban", `"NL91ABNA0417164300"`, `"NL91"`, "/iban"},
		{"amount", `"1250.00"`, `"1250.001"`, "/amount"},
		{"phone", `"+31201234567"`, `"0201234567"`, "/phone"},
		{"leading space", `"Rent for December"`, `" Rent for December"`, "/description"},
		{"trailing space", `"Rent for December"`, `"Rent for December "`, "/description"},
		{"array item", `"office"`, `"Office"`, "/tags/1"},
		{"new line in a value: $ is the end of the text", `"EUR"`, `"EUR\n"`, "/currency"},
	} {
		body := transferBody
		if tt.from != "" {
			body = strings.Replace(body, tt.from, tt.to, 1)
		}
		for _, engine := range []string{"re2", "ecmascript"} {
			err := decode(engine, body)
			switch {
			case tt.at == "" && err != nil:
				t.Errorf("%s on %s: refused: %v", tt.name, engine, err)
			case tt.at != "" && (err == nil || !strings.Contains(err.Error(), tt.at) || !strings.Contains(err.Error(), "must match the pattern")):
				t.Errorf("%s on %s: %v; want a pattern refusal at %s", tt.name, engine, err, tt.at)
			}
		}
	}
}

// TestLookaheadParameterAndKey: a query parameter checked by Mollie-style lookaheads, and the
// declared key pattern (a lookahead) applied by the runtime's key rules.
func TestLookaheadParameterAndKey(t *testing.T) {
	op := operationCreateTransferEcma()
	for target, ok := range map[string]bool{
		"/ecma/transfers?channel=web:eu": true,
		"/ecma/transfers?channel=-":      false, // (?![:\-]$)
		"/ecma/transfers?channel=web--x": false, // (?!.*(--|::))
		"/ecma/transfers":                true,
	} {
		_, _, err := fptest.Decode(op, decodeCreateTransferEcma, httptest.NewRequest("POST", target, nil), "application/json", []byte(transferBody))
		if (err == nil) != ok {
			t.Errorf("%s: %v", target, err)
		}
	}
	var m gen.Matcher
	for key, ok := range map[string]bool{"order-1234-abcd": true, " order-1234": false, "order-1234 ": false} {
		if got := m.MatchWhole(op.Key.Pattern, key); got != ok {
			t.Errorf("key %q matches %v", key, got)
		}
	}
}
