package conform

import (
	"context"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/conform/testdata/vocab"
)

// TestVocabCorpus: the second corpus, a layer written apart from the first that answers in
// other vocabularies (RFC 9457 about:blank problems, plain JSON errors, Stripe's envelope with
// a reused key answered 400 under profile: stripe, ACP's flat error object under profile: acp,
// the IETF draft's sf-string keys under profile: ietf). Each row's own bug modes (an ACP key
// not echoed, or scoped per caller only; a bare key taken under the draft) run in its
// vocabulary. Its correct form passes every check in
// every vocabulary, every operation checked; each of its bug modes fails the check that names
// it, each in one vocabulary in turn (all of them in every vocabulary with IDEMGEN_VOCAB_ALL=1:
// three times the time, for CI's budget).
func TestVocabCorpus(t *testing.T) {
	bugs := make([]vocab.Bug, 0, len(vocab.Bugs))
	for b := range vocab.Bugs {
		bugs = append(bugs, b)
	}
	sort.Slice(bugs, func(i, j int) bool { return bugs[i] < bugs[j] })
	all := os.Getenv("IDEMGEN_VOCAB_ALL") != ""
	for vi, v := range vocab.Vocabs {
		doc := loadSpec(t, "testdata/vocab/"+string(v)+".yaml")
		own := make([]vocab.Bug, 0, len(vocab.RowBugs[v]))
		for b := range vocab.RowBugs[v] {
			own = append(own, b)
		}
		sort.Slice(own, func(i, j int) bool { return own[i] < own[j] })
		for bi, bug := range append(append([]vocab.Bug{""}, bugs...), own...) {
			_, rowBug := vocab.RowBugs[v][bug]
			if bug != "" && !rowBug && !all && (bi-1)%len(vocab.Vocabs) != vi {
				continue
			}
			name := string(v) + "/" + string(bug)
			if bug == "" {
				name = string(v) + "/correct"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h, k := vocab.New(vocab.Server{Vocab: v, Bug: bug})
				srv := httptest.NewServer(h)
				defer srv.Close()
				rep, err := Run(context.Background(), doc, mutantOptions(srv.URL, k))
				if err != nil {
					t.Fatal(err)
				}
				var failed []string
				for _, r := range rep.Results {
					if r.Status == Fail {
						failed = append(failed, string(r.Check))
					}
				}
				var text strings.Builder
				WriteText(&text, rep)
				if bug == "" {
					if len(failed) > 0 || rep.Incomplete() {
						t.Fatalf("the correct layer failed %v (unchecked %v):\n%s", failed, rep.Unchecked, text.String())
					}
					return
				}
				want := vocab.Bugs[bug]
				if rowBug {
					want = vocab.RowBugs[v][bug]
				}
				if !slices.Contains(failed, want) {
					t.Fatalf("%s: %s did not fail (failed: %v):\n%s", bug, want, failed, text.String())
				}
			})
		}
	}
}
