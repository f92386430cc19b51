package model

import "github.com/idemgen/idemgen/internal/diag"

// ErrorFormat is how an operation answers the runtime's problems in the error schemas its spec
// declares (the `errors` mapping of the settings): one document per problem, already checked
// against the schema of the response the spec declares for the problem's status.
type ErrorFormat struct {
	// ContentType is the media type of every error document ("application/json").
	ContentType string
	// Docs are the documents, one per problem name the runtime answers, sorted by name.
	Docs []*ErrorDoc
	// Loc is where the mapping is written.
	Loc diag.Loc
}

// ErrorDoc is the answer to one problem.
type ErrorDoc struct {
	// Problem is the runtime's problem name ("in-flight").
	Problem string
	// Status is the status the answer is sent with; 0 keeps the runtime's.
	Status int
	// Headers are set on the answer, in order.
	Headers []ErrorHeader
	// Schema names the schema the document follows: the component's name ("HttpErrorOut"), or
	// "Error" for the schema the mapping writes itself.
	Schema string
	// SchemaRef is the $ref of the component ("#/components/schemas/HttpErrorOut"); "" for the
	// schema the mapping writes.
	SchemaRef string
	// GoName is the exported Go identifier of Schema ("HTTPErrorOut").
	GoName string
	// Body is the document.
	Body *ErrorValue
}

// ErrorHeader is one header of an error answer.
type ErrorHeader struct{ Name, Value string }

// ErrorKind is the JSON type of an ErrorValue.
type ErrorKind uint8

const (
	ErrorObject ErrorKind = iota + 1
	ErrorArray
	ErrorString
	ErrorInteger
	ErrorNumber
	ErrorBool
)

// ErrorValue is one value of an error document: a constant, a problem field, or text with
// problem fields in it.
type ErrorValue struct {
	Kind ErrorKind
	// Members are an object's members, sorted by name.
	Members []*ErrorMember
	// Items are an array's elements as written; an array that is one problem field (Field
	// "location") has none.
	Items []*ErrorValue
	// Parts are a string's text: literal pieces and problem fields, in order.
	Parts []ErrorPart
	// Literal is the JSON text of a number or boolean constant.
	Literal string
	// Field, for a value that is one problem field as a whole, names it: "status" and
	// "retry_after" (integers), "location" (an array of strings).
	Field string
}

// ErrorMember is one member of an error document's object.
type ErrorMember struct {
	Name string
	// GoName is the exported Go identifier of Name ("doc_url" is DocURL); the generator makes
	// it unique in its struct.
	GoName string
	Value  *ErrorValue
	// Required: the schema requires the member, so it is written even when its problem field is
	// empty; an optional member whose only content is an empty field is left out.
	Required bool
}

// ErrorPart is a literal piece of text (Field "") or a problem field: "name", "title",
// "detail" (the detail, or the title when there is none), "status", "retry_after",
// "pointer" (RFC 6901), "param" (bracket form: metadata[order_id]).
type ErrorPart struct {
	Text  string
	Field string
}

// ErrorResponse is an error response an operation's spec declares: a 4xx or 5xx code, a class
// (4XX, 5XX) or default, with its media types and the shape of its JSON schema. `idemgen
// conform` judges the runtime's refusals by it (a service answers in the schema its spec
// declares).
type ErrorResponse struct {
	// Code is the response's key as written: "422", "4XX", "default".
	Code string
	// MediaTypes are its content's media types, lower case, sorted; empty when it declares no
	// content.
	MediaTypes []string
	// Shape is the shape of its JSON content's schema; nil when it has none.
	Shape *Shape
}

// Shape is the part of a JSON schema an answer is checked against: its type, required members,
// members, enum and items. Nil means any value.
type Shape struct {
	// Type is the JSON type ("object", "array", "string", "integer", "number", "boolean"), ""
	// for any.
	Type string
	// Nullable: null is allowed too.
	Nullable bool
	// Required are the members an object must have.
	Required []string
	// Properties are the shapes of named members.
	Properties map[string]*Shape
	// Enum are the allowed values as JSON text; empty for any.
	Enum []string
	// Items is the shape of an array's elements.
	Items *Shape
}
