package gen

import "encoding/json"

// SetBodyKeyAt reports the idempotency key carried at a JSON pointer's tokens inside value, the
// canonical JSON of a body the generated decoder keeps whole (a oneOf or anyOf body, whose
// members all declare the key member). A member that is absent, null or not a string reports
// no key: the runtime then answers 400 key-missing when the key is required.
func (in *Input) SetBodyKeyAt(value []byte, tokens ...string) {
	v := json.RawMessage(value)
	for _, tok := range tokens {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return
		}
		next, ok := obj[tok]
		if !ok {
			return
		}
		v = next
	}
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		in.SetBodyKey(s, true)
	}
}
