package params

// oneOf/anyOf of scalars in parameters are the text as sent, checked against their members;
// deepObject query parameters are typed, strict, and fingerprinted by their canonical value (so
// two spellings of one value are one request, and two values are two).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

var corpus = []fptest.Request{
	// enableMethod: Mollie's profileId, a profile token or "me".
	{Op: "enableMethod", Target: "/profiles/pfl_QkEhN94Ba/methods/ideal?ratio=0.5", Path: map[string]string{"profileId": "pfl_QkEhN94Ba", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=true", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/you/methods/ideal?ratio=1", Path: map[string]string{"profileId": "you", "methodId": "ideal"}},
	// amount is the text sent: 7 and 007 are both valid, and two requests.
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1&amount=7", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1&amount=007", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1&amount=all", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1&amount=1001", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=0", Path: map[string]string{"profileId": "me", "methodId": "ideal"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1", Path: map[string]string{"profileId": "me", "methodId": "ideal"}, Header: []string{"X-Channel", "-web"}},
	{Op: "enableMethod", Target: "/profiles/me/methods/ideal?ratio=1", Path: map[string]string{"profileId": "me", "methodId": "ideal"}, Header: []string{"X-Channel", "2"}},
	// createExport: deepObject filters. 9 and 10 are one value spelt three ways: one fingerprint.
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[created][gte]=1700000000&filter[tags]=a&filter[tags]=b"},
	{Op: "createExport", Target: "/exports?filter[tags][]=a&filter[created][gte]=01700000000&filter[tags][]=b&filter[status]=open"},
	{Op: "createExport", Target: "/exports?filter%5Bstatus%5D=open&filter%5Bcreated%5D%5Bgte%5D=1700000000&filter%5Btags%5D=a&filter%5Btags%5D=b&unrelated=1"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[created][gte]=1700000001&filter[tags]=a&filter[tags]=b"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[created][gte]=1700000000&filter[tags]=b&filter[tags]=a"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[metadata][k]=v&page[size]=10&labels[team]=ops"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[metadata][k]=v&page[size]=10&labels[team]=ops&page[after]=x"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[metadata][k]=v&page[size]=10"},
	// Refused: undeclared member, missing required member (top level and nested), bad value,
	// a key given twice, a plain key, a bad pattern, the parameter absent.
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[colour]=red"},
	{Op: "createExport", Target: "/exports?filter[created][gte]=1"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[created][lt]=5"},
	{Op: "createExport", Target: "/exports?filter[status]=closed"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[status]=paid"},
	{Op: "createExport", Target: "/exports?filter=open"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[currency]=eur"},
	{Op: "createExport", Target: "/exports?filter[status]=open&page[size]=101"},
	{Op: "createExport", Target: "/exports?filter[status]=open&filter[tags]=a&filter[tags]=b&filter[tags]=c&filter[tags]=d"},
	{Op: "createExport", Target: "/exports"},
}

func TestParamsCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"enableMethod": fptest.Run(operationEnableMethod(), decodeEnableMethod),
		"createExport": fptest.Run(operationCreateExport(), decodeCreateExport),
	}))
	same := [][2]int{{10, 11}, {10, 12}}
	differ := [][2]int{{3, 4}, {10, 13}, {10, 14}, {15, 16}, {15, 17}}
	fp := map[int]string{}
	for _, i := range []int{3, 4, 10, 11, 12, 13, 14, 15, 16, 17} {
		fp[i] = want[i]
	}
	for _, p := range same {
		if fp[p[0]] != fp[p[1]] {
			t.Errorf("requests %d and %d: one value, two fingerprints", p[0], p[1])
		}
	}
	for _, p := range differ {
		if fp[p[0]] == fp[p[1]] {
			t.Errorf("requests %d and %d: two values, one fingerprint", p[0], p[1])
		}
	}
}

// TestParamsDecoded: what the handler gets.
func TestParamsDecoded(t *testing.T) {
	c := corpus[4]
	r, _, err := fptest.Decode(operationEnableMethod(), decodeEnableMethod, c.HTTP(), "", nil)
	if err != nil || r.Params.ProfileID != "me" || r.Params.Amount == nil || *r.Params.Amount != "007" || r.Params.Ratio != "1" {
		t.Errorf("enableMethod: %+v, %v", r.Params, err)
	}
	c = corpus[11]
	e, _, err := fptest.Decode(operationCreateExport(), decodeCreateExport, c.HTTP(), "", nil)
	f := e.Params.Filter
	if err != nil || f.Status != CreateExportParamsFilterStatusOpen || f.Created == nil || f.Created.Gte != 1700000000 ||
		f.Created.Lt != nil || len(f.Tags) != 2 || f.Tags[0] != "a" || e.Params.Page != nil || e.Params.Labels != nil {
		t.Errorf("createExport: %+v, %v", e.Params, err)
	}
	c = corpus[16]
	e, _, err = fptest.Decode(operationCreateExport(), decodeCreateExport, c.HTTP(), "", nil)
	if err != nil || e.Params.Page == nil || *e.Params.Page.Size != 10 || *e.Params.Page.After != "x" ||
		e.Params.Labels["team"] != "ops" || e.Params.Filter.Metadata["k"] != "v" {
		t.Errorf("createExport: %+v, %v", e.Params, err)
	}
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:d4f90daeac73c3ed12ed4f90e62faa3fdd8f06859202f212cc514daef9a7ef52",                                                                                                              // 0 enableMethod
	"v1:61a7d54290cd3881a2bda2a1a69e6fc4b346d09292260a6595d0dcec429ef2ad",                                                                                                              // 1 enableMethod
	"refused at \"/path/profileId\": path parameter \"profileId\": matches no member of the oneOf/anyOf: must match the pattern \"^pfl_.+$\"; or must be one of \"me\"",                // 2 enableMethod
	"v1:baea04223b8d461b910ff4783572b0eb072fc9748f0854b7d50666ec301ee3bc",                                                                                                              // 3 enableMethod
	"v1:618905865d934efbdd7243fef25848d3f48dd97c5339886a573252e8962420c2",                                                                                                              // 4 enableMethod
	"v1:6440eb6e5f3125d58f7312bccfab1fa981e95761b21949f1910291a6acff4913",                                                                                                              // 5 enableMethod
	"refused at \"/query/amount\": query parameter \"amount\": matches no member of the oneOf/anyOf: must be at most 1000; or must be one of \"all\"",                                  // 6 enableMethod
	"refused at \"/query/ratio\": query parameter \"ratio\": matches no member of the oneOf/anyOf: must be greater than 0; or must be true or false",                                   // 7 enableMethod
	"refused at \"/header/X-Channel\": header parameter \"X-Channel\": matches no member of the oneOf/anyOf: must match the pattern \"^(?!-)[a-z-]+$\"; or must be an integer (int64)", // 8 enableMethod
	"v1:5a2a1bf51ab18e396d353f18919778252632bab103817e40c4db8f13575458a9",                                                                                                              // 9 enableMethod
	"v1:e3f9999f79f0e64370a97318e1056084fcf2249e3f050763c07d881a52865267",                                                                                                              // 10 createExport
	"v1:e3f9999f79f0e64370a97318e1056084fcf2249e3f050763c07d881a52865267",                                                                                                              // 11 createExport
	"v1:e3f9999f79f0e64370a97318e1056084fcf2249e3f050763c07d881a52865267",                                                                                                              // 12 createExport
	"v1:0a05272bfe8c275b979123d1106c3d7c15760ffd73cfaa2be30b44a729bdfc9b",                                                                                                              // 13 createExport
	"v1:3132287bf72e09675ffd3651ba853c936420b2c6fd4cb699ec92e01edbc17456",                                                                                                              // 14 createExport
	"v1:969e591b64db79bb88cf7951356add25d0680b54c98e97deb0755bb173193419",                                                                                                              // 15 createExport
	"v1:521a6cd6bb3892b9decf7c0f4b7ee9d6331b570ce742a7a391de0657651ba3df",                                                                                                              // 16 createExport
	"v1:205f3301f4e70cb88afb83dcf70b63487c8b633bc7dda176d953d1ef0a0b1a1f",                                                                                                              // 17 createExport
	"refused at \"/query/filter[colour]\": query parameter \"filter[colour]\": member not allowed by the schema",                                                                       // 18 createExport
	"refused at \"/query/filter[status]\": query parameter \"filter[status]\": missing",                                                                                                // 19 createExport
	"refused at \"/query/filter[created][gte]\": query parameter \"filter[created][gte]\": missing",                                                                                    // 20 createExport
	"refused at \"/query/filter[status]\": query parameter \"filter[status]\": must be one of \"open\", \"paid\", \"void\"",                                                            // 21 createExport
	"refused at \"/query/filter[status]\": query parameter \"filter[status]\": given more than once",                                                                                   // 22 createExport
	"refused at \"/query/filter\": query parameter \"filter\": is not a deepObject key (filter[member]=value, or filter[member][member]=value)",                                        // 23 createExport
	"refused at \"/query/filter[currency]\": query parameter \"filter[currency]\": must match the pattern \"^[A-Z]{3}$\"",                                                              // 24 createExport
	"refused at \"/query/page[size]\": query parameter \"page[size]\": must be at most 100",                                                                                            // 25 createExport
	"refused at \"/query/filter[tags]\": query parameter \"filter[tags]\": must have at most 3 items",                                                                                  // 26 createExport
	"refused at \"/query/filter\": query parameter \"filter\": missing",                                                                                                                // 27 createExport
}
