package model

import (
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour:                  "24h",
		30 * time.Second:                "30s",
		90 * time.Minute:                "1h30m",
		time.Hour + time.Second:         "1h0m1s",
		5 * time.Minute:                 "5m",
		1500 * time.Millisecond:         "1.5s",
		720 * time.Hour:                 "720h",
		10*time.Minute + 30*time.Second: "10m30s",
	} {
		if got := DurationText(d); got != want {
			t.Errorf("DurationText(%v) = %q, want %q", d, got, want)
		}
	}
}
