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
}

func (e *BodyError) Error() string { return e.Reason }

// Pointer returns At: the HTTP layer recognises refusals by this method.
func (e *BodyError) Pointer() string { return e.At }
