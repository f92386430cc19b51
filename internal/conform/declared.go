package conform

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/internal/model"
)

// declaredFor is the error response the spec declares for status: its code, else its class
// (4XX), else default; nil when it declares none.
func declaredFor(rs []model.ErrorResponse, status int) *model.ErrorResponse {
	code := fmt.Sprint(status)
	for _, want := range []string{code, code[:1] + "XX", "default"} {
		for i := range rs {
			if strings.EqualFold(rs[i].Code, want) {
				return &rs[i]
			}
		}
	}
	return nil
}

// judgeDeclared returns "" when e's answer is in the form the spec declares for its status
// (media type, and the shape of its JSON schema), else what differs. An answer whose status
// the spec declares nothing for is not judged here.
func judgeDeclared(rs []model.ErrorResponse, e *Exchange) string {
	d := declaredFor(rs, e.Status)
	if d == nil || len(d.MediaTypes) == 0 {
		return ""
	}
	mt := mediaType(e.header("Content-Type"))
	if !slices.Contains(d.MediaTypes, mt) {
		return fmt.Sprintf("the spec declares the %d as %s (responses: %s), the answer is %q", e.Status, strings.Join(d.MediaTypes, " or "), d.Code, mt)
	}
	if d.Shape == nil {
		return ""
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(e.respBodyRaw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Sprintf("the spec declares the %d as JSON (responses: %s), the body is not JSON: %s", e.Status, d.Code, oneLine(e.RespBody))
	}
	if why := fits(d.Shape, v, ""); why != "" {
		return fmt.Sprintf("the %d does not follow the schema the spec declares for it (responses: %s): %s", e.Status, d.Code, why)
	}
	return ""
}

// fits returns "" when v has shape s, else the first difference, at the JSON pointer at.
func fits(s *model.Shape, v any, at string) string {
	if s == nil {
		return ""
	}
	where := at
	if where == "" {
		where = "/"
	}
	if v == nil {
		if s.Nullable || s.Type == "" {
			return ""
		}
		return fmt.Sprintf("%s is null, the schema wants %s", where, s.Type)
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, jsonText(v)) {
		return fmt.Sprintf("%s is %s, not one of %s", where, jsonText(v), strings.Join(s.Enum, ", "))
	}
	switch s.Type {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s is %s, the schema wants an object", where, jsonType(v))
		}
		for _, r := range s.Required {
			if _, ok := obj[r]; !ok {
				return fmt.Sprintf("%s has no member %q, which the schema requires", where, r)
			}
		}
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if why := fits(s.Properties[k], obj[k], at+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")); why != "" {
				return why
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s is %s, the schema wants an array", where, jsonType(v))
		}
		for i, it := range arr {
			if why := fits(s.Items, it, fmt.Sprintf("%s/%d", at, i)); why != "" {
				return why
			}
		}
	case "string", "boolean":
		if jsonType(v) != s.Type {
			return fmt.Sprintf("%s is %s, the schema wants %s", where, jsonType(v), s.Type)
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Sprintf("%s is %s, the schema wants %s", where, jsonType(v), s.Type)
		}
		if f, err := n.Float64(); s.Type == "integer" && (err != nil || f != math.Trunc(f)) {
			return fmt.Sprintf("%s is %s, the schema wants an integer", where, n)
		}
	}
	return ""
}

// jsonType is the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case nil:
		return "null"
	}
	return "a value"
}
