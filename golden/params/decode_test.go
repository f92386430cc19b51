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
	"v2:64075042d82da3810b0f0adad516eec53167bb46e3608eb72d7e865ac2411bef",                                                                                                              // 0 enableMethod
	"v2:9faeda24ad08bda8961dc1e390938a358a4b088076f4b5b79f68dfdc088625e5",                                                                                                              // 1 enableMethod
	"refused at \"/path/profileId\": path parameter \"profileId\": matches no member of the oneOf/anyOf: must match the pattern \"^pfl_.+$\"; or must be one of \"me\"",                // 2 enableMethod
	"v2:b30bc6b5c2cebc8a0a81105f8382db4bdd69d7e735236a0ebd1a8f77c51c5bad",                                                                                                              // 3 enableMethod
	"v2:7b9c5989aa102f9e6ab458a029178a4bd5c2142a666be88e556085619f57a799",                                                                                                              // 4 enableMethod
	"v2:f6d01e31ab8cc230fc20a87302540c92b312f7ce1c9895dc8c6124d7a416d335",                                                                                                              // 5 enableMethod
	"refused at \"/query/amount\": query parameter \"amount\": matches no member of the oneOf/anyOf: must be at most 1000; or must be one of \"all\"",                                  // 6 enableMethod
	"refused at \"/query/ratio\": query parameter \"ratio\": matches no member of the oneOf/anyOf: must be greater than 0; or must be true or false",                                   // 7 enableMethod
	"refused at \"/header/X-Channel\": header parameter \"X-Channel\": matches no member of the oneOf/anyOf: must match the pattern \"^(?!-)[a-z-]+$\"; or must be an integer (int64)", // 8 enableMethod
	"v2:33f88a5183f7f33464181f2d9f20f073b9ca82257e849fe2438784ba970e2fb7",                                                                                                              // 9 enableMethod
	"v2:702d23a9ef65ace357fd1176027efcccedecff04cdb64972c8b2a214bfac8103",                                                                                                              // 10 createExport
	"v2:702d23a9ef65ace357fd1176027efcccedecff04cdb64972c8b2a214bfac8103",                                                                                                              // 11 createExport
	"v2:702d23a9ef65ace357fd1176027efcccedecff04cdb64972c8b2a214bfac8103",                                                                                                              // 12 createExport
	"v2:4f261bfc4fbdd3413e040a5b06805cd4ea7e905f075a1ada14477ef8ead470bb",                                                                                                              // 13 createExport
	"v2:9c599f46b24350146efc3e09b117a8ad5c985067afece1d2731e88796efe5430",                                                                                                              // 14 createExport
	"v2:ade72b90df028c64939b65fcb97877ea50a8328d5b3f9c3471db00622e5173e1",                                                                                                              // 15 createExport
	"v2:8743ceb0eb0d632b7475cbff308377062fa118ef1c82801ffaadf67e3732471d",                                                                                                              // 16 createExport
	"v2:bbce25f16953c8fc33af799524d06ce04ce652dbfe9bc607f9030afccd4b03db",                                                                                                              // 17 createExport
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
