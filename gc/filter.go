package gc

import (
	"hash/maphash"
	"math"
	"math/bits"

	"github.com/stratafs/stratafs/data"
)

// falsePositive is the rate at which the filter of referenced chunks
// answers "referenced" for a chunk nothing references, when it holds as
// many ids as it was sized for: the share of garbage one run keeps. The
// hash seeds are new every run, so what one run keeps the next one
// collects (a chunk survives k runs with probability falsePositive^k).
const falsePositive = 1e-3

// A filter is a Bloom filter of chunk ids: a set that may claim an id it
// was never given, at a bounded rate, but never denies one it was. The
// collector keeps the chunks it claims, so a false claim only keeps
// garbage for a run. It is not safe for concurrent use.
//
// It costs -ln(p)/ln²2 bits per id: 14.4 bits (1.8 bytes) at p = 10⁻³,
// against 16 bytes of id (and about 40 with a Go map's overhead) for an
// exact set. Chunk ids are random, but they are hashed anyway, with
// seeds that change every run.
type filter struct {
	bits   []uint64
	m      uint64 // len(bits)*64
	k      int    // bits set per id
	s1, s2 maphash.Seed
}

// newFilter returns a filter sized for n ids at rate p. Holding more only
// raises the rate.
func newFilter(n int, p float64) *filter {
	n = max(n, 1024)
	m := uint64(math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2)))
	words := (m + 63) / 64
	return &filter{
		bits: make([]uint64, words),
		m:    words * 64,
		k:    max(1, int(math.Round(-math.Log2(p)))),
		s1:   maphash.MakeSeed(),
		s2:   maphash.MakeSeed(),
	}
}

// probe calls fn with each of id's k bit positions (double hashing).
func (f *filter) probe(id data.ChunkID, fn func(word uint64, bit uint64) bool) bool {
	h1 := maphash.Bytes(f.s1, id[:])
	h2 := maphash.Bytes(f.s2, id[:]) | 1
	for range f.k {
		i, _ := bits.Mul64(h1, f.m) // uniform in [0, m)
		if !fn(i/64, uint64(1)<<(i%64)) {
			return false
		}
		h1 += h2
	}
	return true
}

func (f *filter) add(id data.ChunkID) {
	f.probe(id, func(w, b uint64) bool { f.bits[w] |= b; return true })
}

func (f *filter) has(id data.ChunkID) bool {
	return f.probe(id, func(w, b uint64) bool { return f.bits[w]&b != 0 })
}

// size returns the filter's memory in bytes.
func (f *filter) size() int { return len(f.bits) * 8 }
