package gcpace

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc returns the GOGC the runtime runs with.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// collectUntil runs collections until ok holds of GOGC, for up to 5 s
// (the pacer adjusts in a cleanup, after a cycle ends), and returns it.
func collectUntil(ok func(uint64) bool) uint64 {
	deadline := time.Now().Add(5 * time.Second)
	for !ok(gogc()) && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	return gogc()
}

var ballast []byte

func TestPace(t *testing.T) {
	const headroom = 32 << 20
	stop := Start(headroom)
	// A test binary's live heap is a few MiB: the goal is live + headroom,
	// up to headroom over the runtime's 4 MiB floor (GOGC 800).
	if p := collectUntil(func(p uint64) bool { return p > 100 }); p <= 100 || p > 800 {
		t.Fatalf("GOGC %d with a small live heap, want 101–800", p)
	}
	// A live heap larger than the headroom gets GOGC's default.
	ballast = make([]byte, 2*headroom)
	if p := collectUntil(func(p uint64) bool { return p == 100 }); p != 100 {
		t.Fatalf("GOGC %d with %d MiB live, want 100", p, len(ballast)>>20)
	}
	ballast = nil
	if p := collectUntil(func(p uint64) bool { return p > 100 }); p <= 100 {
		t.Fatalf("GOGC %d once the live heap is small again, want more than 100", p)
	}
	stop()
	if p := gogc(); p != 100 {
		t.Fatalf("GOGC %d once stopped, want 100", p)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := gogc(); p != 100 {
		t.Fatalf("GOGC %d after collections once stopped, want 100", p)
	}
}

func TestGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "100")
	defer Start(32 << 20)()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := gogc(); p != 100 {
		t.Fatalf("GOGC %d with GOGC=100 in the environment, want 100", p)
	}
}
