package spec

import (
	"strconv"
	"strings"
	"unicode"
)

// Every Go name in the model comes from exportedName, and every scope (operations of a
// document, fields of a struct, named schemas) hands names out through a namer, so two spec
// names that map to the same identifier ("create_payment" and "createPayment") get distinct,
// deterministic names: the first in the scope's order keeps the plain one, later ones take a
// numeric suffix (CreatePayment, CreatePayment2).

// initialisms are written in upper case inside Go names, following Go's naming convention
// (Effective Go; the list golint used).
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true,
	"GUID": true, "HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true, "JSON": true,
	"LHS": true, "QPS": true, "RAM": true, "RHS": true, "RPC": true, "SLA": true, "SMTP": true,
	"SQL": true, "SSH": true, "TCP": true, "TLS": true, "TTL": true, "UDP": true, "UI": true,
	"UID": true, "UUID": true, "URI": true, "URL": true, "UTF8": true, "VM": true, "XML": true,
	"XMPP": true, "XSRF": true, "XSS": true,
}

// words splits a spec name into words at non-alphanumeric characters and at case changes
// ("createPayment" -> create, Payment; "HTTPServer" -> HTTP, Server; "payment_id" -> payment, id).
func words(s string) []string {
	var out []string
	rs := []rune(s)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, string(rs[start:end]))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsLower(prev) && unicode.IsUpper(r):
			flush(i)
			start = i
		case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			flush(i)
			start = i
		case unicode.IsDigit(prev) && unicode.IsLetter(r) && unicode.IsUpper(r):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return out
}

// exportedName turns a spec name into an exported Go identifier: words title-cased, known
// initialisms upper-cased and their plurals with a lower-case s ("tax_ids" -> TaxIDs, "urls" ->
// URLs, as Go's own names write them: net/http's Request.URL, staticcheck's ST1003), an "X"
// prefix when the result would not start with an upper-case letter (a digit, or a script
// without case).
func exportedName(s string) string {
	var b strings.Builder
	for _, w := range words(s) {
		up := strings.ToUpper(w)
		switch {
		case initialisms[up]:
			b.WriteString(up)
		case len(up) > 2 && up[len(up)-1] == 'S' && initialisms[up[:len(up)-1]]:
			b.WriteString(up[:len(up)-1])
			b.WriteByte('s')
		default:
			rs := []rune(w)
			b.WriteRune(unicode.ToUpper(rs[0]))
			b.WriteString(string(rs[1:]))
		}
	}
	name := b.String()
	if name == "" {
		return "X"
	}
	if r := []rune(name)[0]; !unicode.IsUpper(r) {
		name = "X" + name
	}
	return name
}

// lowerCamel is exportedName with the first word in lower case, for derived operationIds
// ("post /v1/payments" -> "postV1Payments").
func derivedOperationID(method, path string) string {
	return strings.ToLower(method) + exportedName(path)
}

// namer hands out unique names within one scope.
type namer struct {
	used map[string]bool
}

func newNamer(reserved ...string) *namer {
	n := &namer{used: map[string]bool{}}
	for _, r := range reserved {
		n.used[r] = true
	}
	return n
}

// name returns exportedName(s), or that name with the smallest numeric suffix not yet used.
func (n *namer) name(s string) string {
	base := exportedName(s)
	if !n.used[base] {
		n.used[base] = true
		return base
	}
	for i := 2; ; i++ {
		c := base + strconv.Itoa(i)
		if !n.used[c] {
			n.used[c] = true
			return c
		}
	}
}
