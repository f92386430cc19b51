package model

import (
	"strings"
	"time"
)

// DurationText writes a duration setting the way x-idempotent takes it and people write it:
// 24h, 30s, 1h30m, not Go's 24h0m0s. Every output that prints a setting (idemgen list, idemgen
// spec, the generated settings' comments, the client contract) uses it.
func DurationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
