package reconcile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Format is the file format of a provider's report.
type Format uint8

const (
	// Detect reads the first byte that is not white space: '{' is JSON lines, anything else CSV.
	Detect Format = iota
	// CSV is RFC 4180 comma-separated values with a header line naming the columns.
	CSV
	// JSONLines is one JSON object per line (JSON Lines, NDJSON); blank lines are skipped.
	JSONLines
)

// ParseFormat reads a format's name: "csv", "jsonl" (also "ndjson", "jsonlines"), or "" and
// "auto" for Detect.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return Detect, nil
	case "csv":
		return CSV, nil
	case "jsonl", "ndjson", "jsonlines":
		return JSONLines, nil
	}
	return Detect, fmt.Errorf("report format %q: want csv or jsonl", s)
}

func (f Format) String() string {
	switch f {
	case CSV:
		return "csv"
	case JSONLines:
		return "jsonl"
	}
	return "auto"
}

// Columns names the report's columns (CSV) or members (JSON lines). A JSON member name that
// starts with "/" is an RFC 6901 JSON pointer into the line's object ("/metadata/idempotency_key").
type Columns struct {
	// Key is the provider's idempotency key: what the handler sent as Lease.ProviderKey.
	// Status is the charge's status (see Options.Charged and Options.NotCharged). Both are
	// required.
	Key, Status string
	// Amount (an integer in minor units, or a decimal with Options.AmountDecimal) and Currency
	// (ISO 4217, any case) are compared with what the handler recorded (runtime.Call); Time
	// (RFC 3339, "2006-01-02 15:04:05" in UTC, or Unix seconds or milliseconds) bounds the
	// window of the record-side checks. Empty: the report has no such column.
	Amount, Currency, Time string
}

// DefaultColumns are the column names used when none are configured.
var DefaultColumns = Columns{Key: "idempotency_key", Status: "status", Amount: "amount", Currency: "currency", Time: "created"}

// Line is one line of the provider's report, as read.
type Line struct {
	// Number is the line's number in the file, from 1 (a CSV file's header is line 1).
	Number int
	// ProviderKey is the key column as written (64 hex digits for a call of idemgen's);
	// Status the status column, trimmed.
	ProviderKey string
	Status      string
	// Amount in minor units and Currency in upper case, when the report has them (HasAmount).
	Amount    int64
	HasAmount bool
	Currency  string
	// Time is the line's time; zero when the report has none.
	Time time.Time
	// fields is the whole line as a JSON object (JSON lines: as read; CSV: header → value).
	fields []byte
	header []string
	values []string
}

// JSON returns the whole line as a JSON object: a JSON line as it was read, a CSV line as an
// object of its header's names and the line's values (strings).
func (l *Line) JSON() []byte {
	if l.fields != nil {
		return l.fields
	}
	m := make(map[string]string, len(l.header))
	for i, h := range l.header {
		if i < len(l.values) {
			m[h] = l.values[i]
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// LineError is a report line that cannot be read: Line is its number, Column the column or
// member at fault ("" for the line as a whole).
type LineError struct {
	Line   int
	Column string
	Err    error
}

func (e *LineError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("report line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("report line %d, %s: %v", e.Line, e.Column, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// reader streams a report line by line; memory holds one line.
type reader struct {
	cols    Columns
	decimal bool
	// CSV
	csv    *csv.Reader
	header []string
	index  [5]int // key, status, amount, currency, time: column positions, -1 when absent
	// JSON lines
	lines *bufio.Reader
	line  int
}

// maxJSONLine bounds one JSON line (a report line is a few hundred bytes).
const maxJSONLine = 1 << 20

// newReader reads the report r in format f (CSV or JSONLines) with columns cols; for CSV it
// reads the header and checks that every configured column is there. comma is the CSV
// delimiter (0: ',').
func newReader(r io.Reader, f Format, cols Columns, comma rune, decimal bool) (*reader, error) {
	if cols.Key == "" || cols.Status == "" {
		return nil, errors.New("report columns: the key and status columns must be named")
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	rd := &reader{cols: cols, decimal: decimal}
	if f == JSONLines {
		rd.lines = br
		return rd, nil
	}
	rd.csv = csv.NewReader(stripBOM(br))
	if comma != 0 {
		rd.csv.Comma = comma
	}
	rd.csv.FieldsPerRecord = -1
	header, err := rd.csv.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("report: the CSV file is empty (no header line)")
	}
	if err != nil {
		return nil, fmt.Errorf("report header: %w", err)
	}
	rd.header = make([]string, len(header))
	for i, h := range header {
		rd.header[i] = strings.TrimSpace(h)
	}
	rd.line = 1
	for i, name := range []string{cols.Key, cols.Status, cols.Amount, cols.Currency, cols.Time} {
		rd.index[i] = -1
		if name == "" {
			continue
		}
		for j, h := range rd.header {
			if strings.EqualFold(h, name) {
				rd.index[i] = j
				break
			}
		}
		if rd.index[i] < 0 {
			return nil, fmt.Errorf("report header: no column %q (columns: %s); name the report's columns with the column options", name, strings.Join(rd.header, ", "))
		}
	}
	return rd, nil
}

// open is newReader that detects the format (Detect) from the report's first bytes.
func open(r io.Reader, f Format, cols Columns, comma rune, decimal bool) (*reader, error) {
	if f != Detect {
		return newReader(r, f, cols, comma, decimal)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(4096)
	f = CSV
	if t := bytes.TrimLeft(bytes.TrimPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("\xEF\xBB\xBF")), " \t\r\n"); len(t) > 0 && t[0] == '{' {
		f = JSONLines
	}
	return newReader(br, f, cols, comma, decimal)
}

func stripBOM(br *bufio.Reader) io.Reader {
	if b, err := br.Peek(3); err == nil && string(b) == "\xEF\xBB\xBF" {
		_, _ = br.Discard(3)
	}
	return br
}

// next returns the next line; io.EOF at the end.
func (rd *reader) next() (Line, error) {
	if rd.csv != nil {
		return rd.nextCSV()
	}
	return rd.nextJSON()
}

func (rd *reader) nextCSV() (Line, error) {
	rec, err := rd.csv.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Line{}, io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return Line{}, &LineError{Line: pe.StartLine, Err: pe.Err}
		}
		return Line{}, fmt.Errorf("read report: %w", err)
	}
	n, _ := rd.csv.FieldPos(0)
	rd.line = n
	l := Line{Number: n, header: rd.header, values: rec}
	get := func(i int) string {
		if p := rd.index[i]; p >= 0 && p < len(rec) {
			return strings.TrimSpace(rec[p])
		}
		return ""
	}
	if err := rd.fill(&l, get(0), get(1), get(2), get(3), get(4)); err != nil {
		return Line{}, err
	}
	return l, nil
}

func (rd *reader) nextJSON() (Line, error) {
	for {
		raw, err := rd.lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it, within maxJSONLine.
			buf := append([]byte(nil), raw...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= maxJSONLine {
				raw, err = rd.lines.ReadSlice('\n')
				buf = append(buf, raw...)
			}
			if len(buf) > maxJSONLine {
				return Line{}, &LineError{Line: rd.line + 1, Err: fmt.Errorf("longer than %d bytes", maxJSONLine)}
			}
			raw = buf
		}
		if len(raw) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return Line{}, io.EOF
			}
			return Line{}, fmt.Errorf("read report: %w", err)
		}
		rd.line++
		t := bytes.TrimSpace(raw)
		if rd.line == 1 {
			t = bytes.TrimPrefix(t, []byte("\xEF\xBB\xBF"))
		}
		if len(t) == 0 {
			if err != nil {
				return Line{}, io.EOF
			}
			continue
		}
		var obj map[string]any
		d := json.NewDecoder(bytes.NewReader(t))
		d.UseNumber()
		if err := d.Decode(&obj); err != nil {
			return Line{}, &LineError{Line: rd.line, Err: fmt.Errorf("not a JSON object: %v", err)}
		}
		if d.More() {
			return Line{}, &LineError{Line: rd.line, Err: errors.New("more than one JSON value on the line")}
		}
		l := Line{Number: rd.line, fields: append([]byte(nil), t...)}
		vals := [5]string{}
		for i, name := range []string{rd.cols.Key, rd.cols.Status, rd.cols.Amount, rd.cols.Currency, rd.cols.Time} {
			if name == "" {
				continue
			}
			v, err := member(obj, name)
			if err != nil {
				return Line{}, &LineError{Line: rd.line, Column: name, Err: err}
			}
			vals[i] = v
		}
		if err := rd.fill(&l, vals[0], vals[1], vals[2], vals[3], vals[4]); err != nil {
			return Line{}, err
		}
		return l, nil
	}
}

// member reads a JSON line's member name (or JSON pointer) as text; "" when absent or null.
func member(obj map[string]any, name string) (string, error) {
	var v any = obj
	if strings.HasPrefix(name, "/") {
		for _, tok := range strings.Split(name[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := v.(map[string]any)
			if !ok {
				return "", nil
			}
			if v, ok = m[tok]; !ok {
				return "", nil
			}
		}
	} else {
		var ok bool
		if v, ok = obj[name]; !ok {
			return "", nil
		}
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", errors.New("an object or an array, want a string or a number")
}

// fill parses a line's columns into l.
func (rd *reader) fill(l *Line, key, status, amount, currency, at string) error {
	l.ProviderKey, l.Status = key, status
	l.Currency = strings.ToUpper(currency)
	if amount != "" {
		n, err := parseAmount(amount, l.Currency, rd.decimal)
		if err != nil {
			return &LineError{Line: l.Number, Column: rd.cols.Amount, Err: err}
		}
		l.Amount, l.HasAmount = n, true
	}
	if at != "" {
		t, err := parseTime(at)
		if err != nil {
			return &LineError{Line: l.Number, Column: rd.cols.Time, Err: err}
		}
		l.Time = t
	}
	return nil
}

// parseAmount reads an amount in minor units, or with decimal a decimal amount in major units
// converted with the currency's ISO 4217 exponent ("12.50" EUR is 1250, "1250" JPY is 1250).
func parseAmount(s, currency string, decimal bool) (int64, error) {
	if !decimal {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer amount in minor units (for decimal amounts, set the decimal option)", s)
		}
		return n, nil
	}
	exp := exponent(currency)
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if len(frac) > exp {
		if strings.TrimRight(frac[exp:], "0") != "" {
			return 0, fmt.Errorf("%q has more decimals than %s's %d", s, currency, exp)
		}
		frac = frac[:exp]
	}
	frac += strings.Repeat("0", exp-len(frac))
	if whole == "" || strings.ContainsAny(whole+frac, "+-eE") {
		return 0, fmt.Errorf("%q is not a decimal amount", s)
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal amount", s)
	}
	if neg {
		n = -n
	}
	return n, nil
}

// exponent is the number of minor-unit digits of an ISO 4217 currency (ISO 4217's list;
// currencies not named here have 2).
func exponent(currency string) int {
	switch currency {
	case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF":
		return 0
	case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND":
		return 3
	case "CLF", "UYW":
		return 4
	}
	return 2
}

// parseTime reads RFC 3339, "2006-01-02 15:04:05" with optional fraction and zone (UTC when
// absent), or Unix time in seconds (with a fraction) or milliseconds (13 digits and more).
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && f >= 0 {
		if f >= 1e12 {
			return time.UnixMilli(int64(f)).UTC(), nil
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, \"2006-01-02 15:04:05\", or Unix seconds or milliseconds)", s)
}
