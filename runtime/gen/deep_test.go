package gen

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestDeepObject: the bracketed keys of a deepObject parameter, in path order, with scalars given
// once, arrays repeated or with [], map keys, undeclared members, required members and
// malformed keys.
func TestDeepObject(t *testing.T) {
	read := func(target string, required bool) (map[string]string, error) {
		var in Input
		in.Reset(httptest.NewRequest("GET", target, nil), nil, "", "", nil, &Matcher{})
		p := in.Params()
		got := map[string]string{}
		if p.DeepObject("filter", required).Present() {
			for p.NextMember() {
				switch m := p.Member(); m {
				case "status", "created][gte":
					got[m] = p.Once().Str()
				case "tags":
					var items []string
					for p.Values(); p.Next(); {
						items = append(items, p.Str())
					}
					got[m] = strings.Join(items, ",")
				default:
					if k, ok := p.MapKey("metadata"); ok {
						got["metadata."+k] = p.Once().Str()
						continue
					}
					p.Undeclared()
				}
			}
			p.Required("", "status")
			if _, ok := got["created][gte"]; ok {
				p.Required("created][", "gte")
			}
		}
		return got, in.Err()
	}
	for _, tt := range []struct {
		target   string
		required bool
		want     string // the members read, sorted, or the error
	}{
		{"/?filter[status]=open&filter[created][gte]=1700000000&other=1", false, "created][gte=1700000000 status=open"},
		{"/?filter[tags]=a&filter[status]=x&filter[tags][]=b&filter[tags]=c", false, "status=x tags=a,c,b"},
		{"/?filter[metadata][k1]=v1&filter[metadata][k2]=v2&filter[status]=s", false, "metadata.k1=v1 metadata.k2=v2 status=s"},
		{"/?filter%5Bstatus%5D=enc", false, "status=enc"},
		{"/", false, ""},
		{"/", true, `query parameter "filter": missing`},
		{"/?filter[created][gte]=1", false, `query parameter "filter[status]": missing`},
		{"/?filter[status]=a&filter[status]=b", false, `query parameter "filter[status]": given more than once`},
		{"/?filter[status]=a&filter[nope]=b", false, `query parameter "filter[nope]": member not allowed by the schema`},
		{"/?filter[metadata][a][b]=1&filter[status]=a", false, `query parameter "filter[metadata][a][b]": member not allowed`},
		{"/?filter=open", false, `query parameter "filter": is not a deepObject key`},
		{"/?filter[status=open", false, `query parameter "filter[status": is not a deepObject key`},
		{"/?filter[][status]=open", false, `is not a deepObject key`},
		{"/?filter[a]x=open", false, `is not a deepObject key`},
	} {
		got, err := read(tt.target, tt.required)
		var parts []string
		for k, v := range got {
			parts = append(parts, k+"="+v)
		}
		slices.Sort(parts)
		s := strings.Join(parts, " ")
		if err != nil {
			s = err.Error()
			if be, ok := err.(*BodyError); !ok || !strings.HasPrefix(be.At, "/query/filter") {
				t.Errorf("%s: %#v is not a BodyError at /query/filter…", tt.target, err)
			}
		}
		if !strings.Contains(s, tt.want) || (tt.want == "" && s != "") {
			t.Errorf("%s: %q; want %q", tt.target, s, tt.want)
		}
	}
}
