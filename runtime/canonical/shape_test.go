package canonical_test

// Hand-written code in exactly the shape the generator emits for the conformance service
// (shared/cases/conformance.yaml): typed decoders, canonicalizers and fingerprint functions
// for createPayment (PaymentRequest, fingerprint.exclude: [/client_timestamp]), createOrder
// (fingerprint.exclude: [/metadata/trace_id]) and createCharge (a form body). The case tests in
// cases_test.go drive it. When the generator lands, its output for conformance.yaml should be
// interchangeable with this file.

import (
	"strconv"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// ---- createPayment -------------------------------------------------------------------------

type PaymentRequest struct {
	Amount          int64
	Currency        string
	To              string
	Description     *string
	Metadata        map[string]string
	ClientTimestamp *string
	Extra           canonical.Members
}

func decodeCreatePaymentJSON(data []byte) (PaymentRequest, error) {
	var d canonical.Decoder
	d.Reset(data)
	var v PaymentRequest
	decodePaymentRequest(&d, &v)
	return v, d.Finish()
}

func decodePaymentRequest(d *canonical.Decoder, v *PaymentRequest) {
	if !d.BeginObject() {
		return
	}
	var seen uint64
	for d.NextMember() {
		switch string(d.Name()) {
		case "amount":
			if !d.Once(&seen, 0) {
				return
			}
			v.Amount = d.Int64()
			if v.Amount < 1 {
				d.Invalid("minimum is 1")
			}
		case "currency":
			if !d.Once(&seen, 1) {
				return
			}
			v.Currency = d.Str()
			if n := utf8.RuneCountInString(v.Currency); n < 3 {
				d.Invalid("minLength is 3")
			} else if n > 3 {
				d.Invalid("maxLength is 3")
			}
		case "to":
			if !d.Once(&seen, 2) {
				return
			}
			v.To = d.Str()
		case "description":
			if !d.Once(&seen, 3) {
				return
			}
			s := d.Str()
			v.Description = &s
		case "metadata":
			if !d.Once(&seen, 4) {
				return
			}
			if !d.BeginObject() {
				return
			}
			if v.Metadata == nil {
				v.Metadata = map[string]string{}
			}
			for d.NextMember() {
				k := d.Key()
				if _, dup := v.Metadata[k]; dup {
					d.Duplicate()
					return
				}
				v.Metadata[k] = d.Str()
			}
			d.EndObject()
		case "client_timestamp":
			if !d.Once(&seen, 5) {
				return
			}
			s := d.Str()
			v.ClientTimestamp = &s
		default:
			d.Unknown(&v.Extra)
		}
	}
	d.EndObject()
	switch {
	case seen&(1<<0) == 0:
		d.Missing("amount")
	case seen&(1<<1) == 0:
		d.Missing("currency")
	case seen&(1<<2) == 0:
		d.Missing("to")
	}
}

// Declared members in UTF-16 order: amount currency description metadata to
// (client_timestamp is excluded).
func appendCanonicalPaymentRequest(b []byte, v *PaymentRequest) []byte {
	b = append(b, '{')
	start := len(b)
	x := v.Extra
	b, x = x.AppendBefore(b, start, "amount")
	b = canonical.Comma(b, start)
	b = append(b, `"amount":`...)
	b = canonical.AppendInt(b, v.Amount)
	b, x = x.AppendBefore(b, start, "currency")
	b = append(b, `,"currency":`...)
	b = canonical.AppendString(b, v.Currency)
	b, x = x.AppendBefore(b, start, "description")
	if v.Description != nil {
		b = append(b, `,"description":`...)
		b = canonical.AppendString(b, *v.Description)
	}
	b, x = x.AppendBefore(b, start, "metadata")
	if v.Metadata != nil {
		b = append(b, `,"metadata":`...)
		b = canonical.AppendMap(b, v.Metadata, canonical.AppendString)
	}
	b, x = x.AppendBefore(b, start, "to")
	b = append(b, `,"to":`...)
	b = canonical.AppendString(b, v.To)
	b = x.AppendAll(b, start)
	return append(b, '}')
}

func fingerprintCreatePayment(mediaType string, v *PaymentRequest) canonical.Fingerprint {
	var f canonical.Framer
	f.Begin("createPayment", "POST", "/v1/payments")
	f.MediaType(mediaType)
	f.BodyEnd(appendCanonicalPaymentRequest(f.BodyStart(), v))
	return f.Sum()
}

// ---- createOrder ---------------------------------------------------------------------------

type CreateOrderBody struct {
	Payer    CreateOrderBodyPayer
	Lines    []CreateOrderBodyLinesItem
	Metadata map[string]string
	Extra    canonical.Members
}

type CreateOrderBodyPayer struct {
	Name    string
	Country *string
	Extra   canonical.Members
}

type CreateOrderBodyLinesItem struct {
	Sku       string
	Qty       int64
	UnitPrice *float64
	Extra     canonical.Members
}

func decodeCreateOrderJSON(data []byte) (CreateOrderBody, error) {
	var d canonical.Decoder
	d.Reset(data)
	var v CreateOrderBody
	decodeCreateOrderBody(&d, &v)
	return v, d.Finish()
}

func decodeCreateOrderBody(d *canonical.Decoder, v *CreateOrderBody) {
	if !d.BeginObject() {
		return
	}
	var seen uint64
	for d.NextMember() {
		switch string(d.Name()) {
		case "payer":
			if !d.Once(&seen, 0) {
				return
			}
			decodeCreateOrderBodyPayer(d, &v.Payer)
		case "lines":
			if !d.Once(&seen, 1) {
				return
			}
			if !d.BeginArray() {
				return
			}
			v.Lines = []CreateOrderBodyLinesItem{}
			for d.NextElement() {
				var e CreateOrderBodyLinesItem
				decodeCreateOrderBodyLinesItem(d, &e)
				v.Lines = append(v.Lines, e)
			}
			d.EndArray()
		case "metadata":
			if !d.Once(&seen, 2) {
				return
			}
			if !d.BeginObject() {
				return
			}
			if v.Metadata == nil {
				v.Metadata = map[string]string{}
			}
			for d.NextMember() {
				k := d.Key()
				if _, dup := v.Metadata[k]; dup {
					d.Duplicate()
					return
				}
				v.Metadata[k] = d.Str()
			}
			d.EndObject()
		default:
			d.Unknown(&v.Extra)
		}
	}
	d.EndObject()
	switch {
	case seen&(1<<0) == 0:
		d.Missing("payer")
	case seen&(1<<1) == 0:
		d.Missing("lines")
	}
}

func decodeCreateOrderBodyPayer(d *canonical.Decoder, v *CreateOrderBodyPayer) {
	if !d.BeginObject() {
		return
	}
	var seen uint64
	for d.NextMember() {
		switch string(d.Name()) {
		case "name":
			if !d.Once(&seen, 0) {
				return
			}
			v.Name = d.Str()
		case "country":
			if !d.Once(&seen, 1) {
				return
			}
			s := d.Str()
			v.Country = &s
		default:
			d.Unknown(&v.Extra)
		}
	}
	d.EndObject()
	if seen&(1<<0) == 0 {
		d.Missing("name")
	}
}

func decodeCreateOrderBodyLinesItem(d *canonical.Decoder, v *CreateOrderBodyLinesItem) {
	if !d.BeginObject() {
		return
	}
	var seen uint64
	for d.NextMember() {
		switch string(d.Name()) {
		case "sku":
			if !d.Once(&seen, 0) {
				return
			}
			v.Sku = d.Str()
		case "qty":
			if !d.Once(&seen, 1) {
				return
			}
			v.Qty = d.Int64()
		case "unit_price":
			if !d.Once(&seen, 2) {
				return
			}
			f := d.Float64()
			v.UnitPrice = &f
		default:
			d.Unknown(&v.Extra)
		}
	}
	d.EndObject()
	switch {
	case seen&(1<<0) == 0:
		d.Missing("sku")
	case seen&(1<<1) == 0:
		d.Missing("qty")
	}
}

// Declared members in UTF-16 order: lines metadata payer.
func appendCanonicalCreateOrderBody(b []byte, v *CreateOrderBody) []byte {
	b = append(b, '{')
	start := len(b)
	x := v.Extra
	b, x = x.AppendBefore(b, start, "lines")
	b = canonical.Comma(b, start)
	b = append(b, `"lines":`...)
	b = append(b, '[')
	for i := range v.Lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCanonicalCreateOrderBodyLinesItem(b, &v.Lines[i])
	}
	b = append(b, ']')
	b, x = x.AppendBefore(b, start, "metadata")
	if v.Metadata != nil {
		b = append(b, `,"metadata":`...)
		b = canonical.AppendMap(b, v.Metadata, canonical.AppendString, "trace_id")
	}
	b, x = x.AppendBefore(b, start, "payer")
	b = append(b, `,"payer":`...)
	b = appendCanonicalCreateOrderBodyPayer(b, &v.Payer)
	b = x.AppendAll(b, start)
	return append(b, '}')
}

// Declared members in UTF-16 order: country name.
func appendCanonicalCreateOrderBodyPayer(b []byte, v *CreateOrderBodyPayer) []byte {
	b = append(b, '{')
	start := len(b)
	x := v.Extra
	b, x = x.AppendBefore(b, start, "country")
	if v.Country != nil {
		b = canonical.Comma(b, start)
		b = append(b, `"country":`...)
		b = canonical.AppendString(b, *v.Country)
	}
	b, x = x.AppendBefore(b, start, "name")
	b = canonical.Comma(b, start)
	b = append(b, `"name":`...)
	b = canonical.AppendString(b, v.Name)
	b = x.AppendAll(b, start)
	return append(b, '}')
}

// Declared members in UTF-16 order: qty sku unit_price.
func appendCanonicalCreateOrderBodyLinesItem(b []byte, v *CreateOrderBodyLinesItem) []byte {
	b = append(b, '{')
	start := len(b)
	x := v.Extra
	b, x = x.AppendBefore(b, start, "qty")
	b = canonical.Comma(b, start)
	b = append(b, `"qty":`...)
	b = canonical.AppendInt(b, v.Qty)
	b, x = x.AppendBefore(b, start, "sku")
	b = append(b, `,"sku":`...)
	b = canonical.AppendString(b, v.Sku)
	b, x = x.AppendBefore(b, start, "unit_price")
	if v.UnitPrice != nil {
		b = append(b, `,"unit_price":`...)
		b = canonical.AppendFloat(b, *v.UnitPrice)
	}
	b = x.AppendAll(b, start)
	return append(b, '}')
}

func fingerprintCreateOrder(mediaType string, v *CreateOrderBody) canonical.Fingerprint {
	var f canonical.Framer
	f.Begin("createOrder", "POST", "/v1/orders")
	f.MediaType(mediaType)
	f.BodyEnd(appendCanonicalCreateOrderBody(f.BodyStart(), v))
	return f.Sum()
}

// ---- createCharge (application/x-www-form-urlencoded) ----------------------------------------

type CreateChargeBody struct {
	Amount      int64
	Currency    string
	Description *string
}

func decodeCreateChargeForm(data []byte) (CreateChargeBody, error) {
	fields, err := canonical.ParseForm(data)
	if err != nil {
		return CreateChargeBody{}, err
	}
	var v CreateChargeBody
	var seen uint64
	for _, f := range fields {
		switch f.Name {
		case "amount":
			if seen&(1<<0) != 0 {
				return v, &canonical.Error{Pointer: "/amount", Reason: "repeated field"}
			}
			seen |= 1 << 0
			n, err := strconv.ParseInt(f.Value, 10, 64)
			if err != nil {
				return v, &canonical.Error{Pointer: "/amount", Reason: "not an integer"}
			}
			v.Amount = n
		case "currency":
			seen |= 1 << 1
			v.Currency = f.Value
		case "description":
			s := f.Value
			v.Description = &s
		}
	}
	switch {
	case seen&(1<<0) == 0:
		return v, &canonical.Error{Reason: `missing required field "amount"`}
	case seen&(1<<1) == 0:
		return v, &canonical.Error{Reason: `missing required field "currency"`}
	}
	return v, nil
}

func fingerprintCreateCharge(mediaType string, body []byte) (canonical.Fingerprint, error) {
	var f canonical.Framer
	f.Begin("createCharge", "POST", "/v1/charges")
	f.MediaType(mediaType)
	err := f.FormBody(body)
	return f.Sum(), err
}
