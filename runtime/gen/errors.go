package gen

// BodyError is a request refused by generated code for a reason that is not a JSON syntax or
// schema error at a byte offset: a bad path, query or header parameter, or a body whose media type
// has no decoder. It is answered 400 body-invalid naming At.
type BodyError struct {
	// At is the JSON pointer (RFC 6901) of the offending value, "" for the whole body; parameters
	// use "/path/<name>", "/query/<name>" and "/header/<name>".
	At string
	// Reason says what is wrong, for the problem's detail; for parameters it names the parameter
	// (`query parameter "limit": must be at most 100`).
	Reason string
	// Status is the HTTP status of the refusal: 0 is 400 body-invalid; 413 is a multipart part
	// over limits.part (body-too-large).
	Status int
	// Allowed, for a parameter outside its schema's string enum, are the values the enum
	// allows (an error document may list them: the Agentic Commerce Protocol's
	// supported_versions for an API-Version it does not support).
	Allowed []string
}

// AllowedValues returns Allowed: the HTTP layer copies it into the problem it answers with.
func (e *BodyError) AllowedValues() []string { return e.Allowed }

func (e *BodyError) Error() string { return e.Reason }

// Pointer returns At: the HTTP layer recognises refusals by this method.
func (e *BodyError) Pointer() string { return e.At }
