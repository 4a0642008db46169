// Package gcpace paces Go's garbage collector for a long-running server
// whose live heap is small next to what it allocates.
//
// With GOGC at its default of 100, the collector starts a cycle once the
// heap has grown by as much as the last cycle left live (4 MiB at least).
// A server that holds a few MiB while its requests allocate tens of MB a
// second (bodies, manifests, bbolt's pages) then collects many times a
// second: in the S3 4 KiB PUT figure the collector took 13 % of the
// server's CPU. Pacing lets the heap grow by a fixed headroom past its
// live size instead, and falls back to GOGC 100 once the live heap is
// larger than the headroom: a mount holding 100,000 inodes keeps the
// collector it had.
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Headroom is what stratafs's servers (serve, mount) let the heap grow by
// past its live size; it bounds what pacing adds to their memory.
// Measured on 2026-12-04 (make bench, 2 alternating runs each):
//
//	headroom  S3 4 KiB PUT, 16 clients   anonymous memory growth while
//	          server CPU per PUT         listing 1M keys / getdents of 1M files
//	none      265–292 µs                 7–10 / 20 MiB
//	16 MiB    218–225 µs                 17 / 24 MiB
//	32 MiB    204–213 µs                 34 / 40 MiB
//
// The design's bound on that growth is 64 MiB.
const Headroom = 16 << 20

// heapMinimum is the runtime's floor under the heap goal at GOGC 100.
// It scales with GOGC, so pacing never sets more than headroom over it:
// beyond that, a live heap of a few MiB would get a goal above live +
// headroom.
const heapMinimum = 4 << 20

// Start paces the collector with headroom until the returned function is
// called, which restores GOGC 100. It does nothing when the environment
// sets GOGC: an operator's choice wins. GOMEMLIMIT applies either way.
func Start(headroom uint64) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	p := &pacer{headroom: headroom, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	p.adjust()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stopped = true
		debug.SetGCPercent(100)
	}
}

type pacer struct {
	headroom uint64

	mu      sync.Mutex
	stopped bool
	live    []metrics.Sample
	percent uint64
}

// A sentinel is allocated unreachable: its cleanup runs after the
// collection that finds it so, which is how the pacer sees every cycle
// end. It holds a pointer so that the allocator does not pack it with
// other tiny objects, whose cleanups might then never run.
type sentinel struct{ _ *pacer }

// adjust sets GOGC from the live heap the last collection left, and
// arranges to be called again after the next one.
func (p *pacer) adjust() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	metrics.Read(p.live)
	most := p.headroom * 100 / heapMinimum
	percent := most
	if live := p.live[0].Value.Uint64(); live > 0 {
		percent = min(p.headroom*100/live, most)
	}
	percent = max(percent, 100)
	if percent != p.percent {
		debug.SetGCPercent(int(percent))
		p.percent = percent
	}
	runtime.AddCleanup(&sentinel{}, (*pacer).adjust, p)
}
