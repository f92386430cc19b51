package fiberroute

import "testing"

// Match routes a path as fiber does under each of its settings: letter case folded unless
// CaseSensitive, a trailing slash ignored unless StrictRouting, percent-decoded with
// UnescapePath, after the prefix; a parameter matches one non-empty segment.
func TestMatch(t *testing.T) {
	ops := []Op{NewOp("createPayment", "POST", "/v1/payments"), NewOp("createRefund", "POST", "/v1/payments/{payment_id}/refunds")}
	for _, tt := range []struct {
		method, path, prefix string
		cfg                  Config
		want                 string
	}{
		{"POST", "/v1/payments", "", Config{}, "createPayment"},
		{"POST", "/V1/Payments/", "", Config{}, "createPayment"},
		{"POST", "/V1/Payments", "", Config{CaseSensitive: true}, ""},
		{"POST", "/v1/payments/", "", Config{StrictRouting: true}, ""},
		{"POST", "/v1/payments/pay_1/refunds", "", Config{}, "createRefund"},
		{"POST", "/v1/payments//refunds", "", Config{}, ""},
		{"POST", "/v1/%70ayments", "", Config{UnescapePath: true}, "createPayment"},
		{"POST", "/v1/%70ayments", "", Config{}, ""},
		{"POST", "/api/v1/payments", "/api", Config{}, "createPayment"},
		{"POST", "/apiv1/payments", "/api", Config{}, ""},
		{"GET", "/v1/payments", "", Config{}, ""},
	} {
		got, ok := Match(ops, tt.method, tt.path, tt.prefix, tt.cfg)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s %s (prefix %q, %+v): %q %v, want %q", tt.method, tt.path, tt.prefix, tt.cfg, got, ok, tt.want)
		}
	}
}

func TestSameShape(t *testing.T) {
	for _, tt := range []struct {
		route, template string
		want            bool
	}{
		{"/v1/payments/:id/refunds", "/v1/payments/{payment_id}/refunds", true},
		{"/V1/payments", "/v1/payments", true},
		{"/v1/payments", "/v1/payments/{id}", false},
		{"/v1/:x", "/v1/payments", false},
	} {
		if got := SameShape(tt.route, tt.template); got != tt.want {
			t.Errorf("SameShape(%q, %q) = %v", tt.route, tt.template, got)
		}
	}
}
