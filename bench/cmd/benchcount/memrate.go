package main

import "runtime"

// setMemProfileRate sets runtime.MemProfileRate and returns the previous rate.
func setMemProfileRate(rate int) int {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = rate
	return old
}
