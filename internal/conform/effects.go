package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Effects is the effects oracle: it counts the business effects the service has made so far
// (rows written, calls to a provider), from outside the service. Checks read it before and
// after their requests, so it must count every operation checked and nothing else that moves
// during the run. A nil Effects leaves the effect checks out (they say so).
type Effects func(ctx context.Context) (int64, error)

// EffectsCommand returns an oracle that runs command with `sh -c` and reads its output: one
// integer (`psql -Atc 'select count(*) from payments'`), or a JSON object whose numbers are
// summed (`curl -s localhost:8080/_effects`). The command has timeout to answer.
func EffectsCommand(command string, timeout time.Duration) Effects {
	return func(ctx context.Context) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			msg := strings.TrimSpace(stderr.String())
			if msg != "" {
				return 0, fmt.Errorf("--effects-cmd %q: %v: %s", command, err, msg)
			}
			return 0, fmt.Errorf("--effects-cmd %q: %v", command, err)
		}
		n, err := ParseEffects(out)
		if err != nil {
			return 0, fmt.Errorf("--effects-cmd %q: %w", command, err)
		}
		return n, nil
	}
}

// ParseEffects reads an effects count: an integer, or a JSON object (possibly nested) whose
// numbers are summed.
func ParseEffects(out []byte) (int64, error) {
	text := strings.TrimSpace(string(out))
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	v, ok := decodeValue(text)
	if !ok {
		return 0, fmt.Errorf("want an integer or a JSON object of counts, got %q", oneLine(text))
	}
	var sum int64
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		case json.Number:
			n, err := x.Int64()
			if err != nil {
				return fmt.Errorf("the count %s is not an integer", x)
			}
			sum += n
		}
		return nil
	}
	if _, isObj := v.(map[string]any); !isObj {
		return 0, fmt.Errorf("want an integer or a JSON object of counts, got %q", oneLine(text))
	}
	if err := walk(v); err != nil {
		return 0, err
	}
	return sum, nil
}
