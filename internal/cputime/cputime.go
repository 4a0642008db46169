// Package cputime measures the CPU time of the process: a figure the load
// of a shared machine disturbs less than the time an operation takes.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Used is the CPU time this process has used so far, user and system.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer cannot fail
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PerOp resets b's timer and reports the CPU time the process (every
// goroutine of it, user and system) spends per operation from now until
// the benchmark ends, as "cpu-ns/op".
func PerOp(b *testing.B) {
	before := Used()
	b.ResetTimer()
	b.Cleanup(func() {
		b.ReportMetric(float64((Used()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}
