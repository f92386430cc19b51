package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// glue are the marks of hand-written idempotency code: the key or replay headers read or
// written, ACP's idempotency codes or version refusal written out, an answer kept out of the
// store, an error writer of the runtime's replaced, a fingerprint or key handled by hand, the
// API version checked by hand. Every one of them is generated code's or the runtime's job under
// `profile: acp`.
var glue = regexp.MustCompile(`(?i)idempotency-key|idempotent-replayed|retry-after|idempotency_key_required|idempotency_conflict|` +
	`idempotency_in_flight|unsupported_api_version|supported_versions|api-version|request-id|NotFinal|ProblemWriter|WriteProblem|` +
	`Fingerprint|UnquoteKey|RecordKey|StatusRule|Statuses:|KeyRule|\.Profile\b|EchoKey`)

// TestNoIdempotencyGlue counts the lines of the merchant's own Go code (not generated, not
// tests) that do idempotency work by hand: there must be none. The one use of the key the
// merchant makes is business data, read through runtime.IdempotencyKey (delegate_payment keeps
// the key with the token it made, as ACP's example response shows it).
func TestNoIdempotencyGlue(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines, glueLines, keyUses := 0, 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code := strings.TrimSpace(line)
			if code == "" || strings.HasPrefix(code, "//") {
				continue
			}
			lines++
			if strings.Contains(code, "runtime.IdempotencyKey(ctx)") {
				keyUses++
				continue
			}
			if glue.MatchString(code) {
				glueLines++
				t.Errorf("%s:%d is idempotency glue: %s", f, i+1, code)
			}
		}
	}
	t.Logf("%d lines of hand-written Go (comments and blank lines aside), %d of idempotency glue, %d reading the key as business data", lines, glueLines, keyUses)
	if lines == 0 || keyUses != 1 {
		t.Errorf("counted %d lines and %d reads of the key: the count looks at the wrong files", lines, keyUses)
	}
}
