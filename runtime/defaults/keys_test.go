package defaults

import "testing"

// The settings' names read back to their values, the default is the zero value, and an unknown
// name is refused: the loader, the generator and the runtime agree on one table.
func TestKeySyntaxNames(t *testing.T) {
	for i, n := range KeyCharactersNames() {
		c, ok := ParseKeyCharacters(n)
		if !ok || int(c) != i || c.String() != n {
			t.Errorf("key.characters %q: %v %v", n, c, ok)
		}
	}
	for i, n := range KeyQuotingNames() {
		q, ok := ParseKeyQuoting(n)
		if !ok || int(q) != i || q.String() != n {
			t.Errorf("key.quoted %q: %v %v", n, q, ok)
		}
	}
	if KeyCharactersNames()[0] != "visible" || KeyQuotingNames()[0] != "accept" {
		t.Error("the defaults are not the zero values")
	}
	if _, ok := ParseKeyCharacters("ascii"); ok {
		t.Error("an unknown key.characters name was read")
	}
	if _, ok := ParseKeyQuoting("quoted"); ok {
		t.Error("an unknown key.quoted name was read")
	}
}

// A Firefox key is an sf-string of decimal digits: the key is the digits, and quoted says it
// was sent quoted (runtime's optional-key rule reads it).
func TestKeyTextFirefox(t *testing.T) {
	k, quoted, err := KeyText(`"9007199254740993"`, KeyQuotedAccepted, KeyVisible)
	if err != nil || k != "9007199254740993" || !quoted {
		t.Errorf("%q %v %v", k, quoted, err)
	}
	if KeyLength("鍵k") != 2 {
		t.Error("KeyLength counts bytes, not characters")
	}
}
