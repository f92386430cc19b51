package canonical

// DecodeMap reads an object (additionalProperties) into *m, allocating the map when it is nil,
// with each value read by value: (*Decoder).Str, (*Decoder).Int64, (*Decoder).Float64,
// (*Decoder).Bool, (*Decoder).Raw or a generated function. A name that occurs twice is the
// error "duplicate member name". Map keys are compared exactly (case-sensitive).
func DecodeMap[V any](d *Decoder, m *map[string]V, value func(*Decoder) V) {
	if !d.BeginObject() {
		return
	}
	if *m == nil {
		*m = make(map[string]V)
	}
	for d.NextMember() {
		if _, dup := (*m)[string(d.Name())]; dup {
			d.duplicate()
			return
		}
		k := d.nameString()
		v := value(d)
		if d.err != nil {
			return
		}
		(*m)[k] = v
	}
	d.EndObject()
}

// DecodeArray reads an array into *s (non-nil after a successful read, even when empty), each
// element read by value.
func DecodeArray[V any](d *Decoder, s *[]V, value func(*Decoder) V) {
	if !d.BeginArray() {
		return
	}
	if *s == nil {
		*s = []V{}
	}
	for d.NextElement() {
		v := value(d)
		if d.err != nil {
			return
		}
		*s = append(*s, v)
	}
	d.EndArray()
}
