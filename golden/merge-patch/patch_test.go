package mergepatch

// Hand-written tests of the code generated for testdata/specs/merge-patch.yaml: null is not
// absent. A JSON merge patch (RFC 7396) reads every optional member, nested objects and map
// values included, as absent, null or a value, and the three fingerprint apart; array
// elements are values, not patches; body.nulls: clear reads a JSON body the same way, and
// body.unknown: accept takes the undeclared members of a closed object into the fingerprint.

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

func patch(t *testing.T, body string) (PatchProfileBody, canonical.Fingerprint, error) {
	t.Helper()
	r := httptest.NewRequest("PATCH", "/v1/profiles/p1", nil)
	r.SetPathValue("id", "p1")
	v, fp, err := fptest.Decode(operationPatchProfile(), decodePatchProfile, r, "application/merge-patch+json", []byte(body))
	return v.Body, fp, err
}

func TestMergePatchHasThreeStates(t *testing.T) {
	b, _, err := patch(t, `{"name":"n","tip":null,"nickname":null,"address":{"line1":"x","city":null},"labels":{"a":"1","b":null},"lines":null}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.Tip == nil || !b.Tip.Null || b.Nickname == nil || !b.Nickname.Null || b.Lines == nil || !b.Lines.Null {
		t.Errorf("null members decoded as %+v, want Null", b)
	}
	if b.Address == nil || b.Address.Null || b.Address.Value.City == nil || !b.Address.Value.City.Null {
		t.Errorf("a nested null member decoded as %+v, want Null", b.Address)
	}
	if b.Labels == nil || b.Labels.Null || b.Labels.Value["a"].Value != "1" || b.Labels.Value["a"].Null || !b.Labels.Value["b"].Null {
		t.Errorf("map values decoded as %+v, want a value and a Null", b.Labels)
	}
	b, _, err = patch(t, `{"name":"n"}`)
	if err != nil || b.Tip != nil || b.Nickname != nil || b.Address != nil || b.Labels != nil || b.Lines != nil {
		t.Errorf("absent members decoded as %+v, %v; want nil", b, err)
	}
	b, _, err = patch(t, `{"name":"n","tip":5}`)
	if err != nil || b.Tip == nil || b.Tip.Null || b.Tip.Value != 5 {
		t.Errorf("a value decoded as %+v, %v", b.Tip, err)
	}
}

// Each pair is two requests a handler tells apart: they must never share a fingerprint, so that
// a retry of one under the other's key is a mismatch (422), not the other's stored answer.
func TestMergePatchNullAndAbsentFingerprintApart(t *testing.T) {
	for _, pair := range [][2]string{
		{`{"name":"n","tip":null}`, `{"name":"n"}`},
		{`{"name":"n","tip":null}`, `{"name":"n","tip":0}`},
		{`{"name":"n","address":{"line1":"x","city":null}}`, `{"name":"n","address":{"line1":"x"}}`},
		{`{"name":"n","address":null}`, `{"name":"n"}`},
		{`{"name":"n","labels":{"a":null}}`, `{"name":"n","labels":{}}`},
		{`{"name":"n","labels":{"a":null}}`, `{"name":"n","labels":{"a":""}}`},
		{`{"name":"n","lines":null}`, `{"name":"n","lines":[]}`},
	} {
		_, a, errA := patch(t, pair[0])
		_, b, errB := patch(t, pair[1])
		if errA != nil || errB != nil {
			t.Fatalf("%s / %s: %v %v", pair[0], pair[1], errA, errB)
		}
		if a == b {
			t.Errorf("%s and %s fingerprint alike (%s)", pair[0], pair[1], a)
		}
	}
	// The same patch spelled differently is the same request.
	_, a, _ := patch(t, `{"name":"n","tip":null,"address":{"city":null,"line1":"x"}}`)
	_, b, _ := patch(t, `{ "address" : {"line1":"x","city":null} , "tip":null,"name":"n"}`)
	if a != b {
		t.Errorf("member order changed the fingerprint: %s, %s", a, b)
	}
}

// A merge patch keeps the schema where it speaks: a required member stays required and may not
// be null, an array's elements are values (an array replaces the target's, RFC 7396 section 2),
// and a closed object stays closed.
func TestMergePatchKeepsTheSchema(t *testing.T) {
	for body, want := range map[string]string{
		`{"tip":1}`:                                    "name",
		`{"name":null}`:                                "/name",
		`{"name":"n","lines":[null]}`:                  "/lines/0",
		`{"name":"n","lines":[{"line1":null}]}`:        "/lines/0/line1",
		`{"name":"n","address":{"line1":"x","zip":1}}`: "/address/zip",
		`{"name":"n","tip":-1}`:                        "/tip",
	} {
		if _, _, err := patch(t, body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal naming %s", body, err, want)
		}
	}
}

// The same schema read as itself (createProfile's JSON body) keeps two states for a member that
// is optional and not nullable: null is refused, as the schema says.
func TestPlainBodyRefusesNullWhereTheSchemaDoes(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/profiles", nil)
	if _, _, err := fptest.Decode(operationCreateProfile(), decodeCreateProfile, r, "application/json", []byte(`{"name":"n","tip":null}`)); err == nil || !strings.Contains(err.Error(), "/tip") {
		t.Errorf("null for a member that is not nullable: %v, want a refusal naming /tip", err)
	}
	v, _, err := fptest.Decode(operationCreateProfile(), decodeCreateProfile, r, "application/json", []byte(`{"name":"n","nickname":null}`))
	if err != nil || v.Body.Nickname == nil || !v.Body.Nickname.Null {
		t.Errorf("a nullable member sent as null: %+v, %v", v.Body.Nickname, err)
	}
}

// Behind the Middleware the wrapped handler reads the body as re-encoded: null stays null, and
// an absent member stays absent, exactly as the fingerprint tells them apart.
func TestReencodingKeepsNull(t *testing.T) {
	r := httptest.NewRequest("PATCH", "/v1/profiles/p1", nil)
	r.SetPathValue("id", "p1")
	_, _, got, _, err := fptest.Reencoded(operationPatchProfile(), decodePatchProfile, r, "application/merge-patch+json", []byte(`{"name": "n", "tip": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"name":"n","tip":null}` {
		t.Errorf("re-encoded as %s, want null kept", got)
	}
}

func session(t *testing.T, body string) (UpdateSessionBody, canonical.Fingerprint, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/v1/sessions/s1", nil)
	r.SetPathValue("id", "s1")
	v, fp, err := fptest.Decode(operationUpdateSession(), decodeUpdateSession, r, "application/json", []byte(body))
	return v.Body, fp, err
}

// body.nulls: clear reads a JSON body as a merge patch; body.unknown: accept takes undeclared
// members of closed objects, at any depth, into the fingerprint (the Agentic Commerce Protocol's
// extension fields count in its request equivalence).
func TestBodySettings(t *testing.T) {
	b, _, err := session(t, `{"buyer":{"email":"e","phone":null},"coupons":null}`)
	if err != nil || b.Buyer == nil || b.Buyer.Value.Phone == nil || !b.Buyer.Value.Phone.Null || b.Coupons == nil || !b.Coupons.Null {
		t.Fatalf("decoded %+v, %v", b, err)
	}
	b, fpExt, err := session(t, `{"buyer":{"email":"e","loyalty":{"tier":"gold"}},"x_ext":[1]}`)
	if err != nil {
		t.Fatalf("undeclared members refused under body.unknown: accept: %v", err)
	}
	if len(b.Extra) == 0 || len(b.Buyer.Value.Extra) == 0 {
		t.Errorf("undeclared members not kept: %+v", b)
	}
	_, fpPlain, _ := session(t, `{"buyer":{"email":"e"}}`)
	_, fpOther, _ := session(t, `{"buyer":{"email":"e","loyalty":{"tier":"silver"}},"x_ext":[1]}`)
	if fpExt == fpPlain || fpExt == fpOther {
		t.Errorf("undeclared members do not count in the fingerprint: %s %s %s", fpExt, fpPlain, fpOther)
	}
	// A member equal to a declared one up to case is still refused: a decoder that matches
	// names case-insensitively would take it for the declared one.
	if _, _, err := session(t, `{"buyer":{"email":"e","Email":"f"}}`); err == nil {
		t.Error("a case variant of a declared member was accepted")
	}
}
