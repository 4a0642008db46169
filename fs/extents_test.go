package fs

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratafs/stratafs/object"
)

// TestExtentsAgainstABitmap adds and cuts random ranges and compares the
// set with a bitmap of the same bytes.
func TestExtentsAgainstABitmap(t *testing.T) {
	const size = 200
	for round := range 200 {
		var x extents
		var bits [size]bool
		for range 20 {
			if rand.IntN(5) == 0 {
				n := rand.Int64N(size)
				x.cut(n)
				clear(bits[n:])
			} else {
				off, n := rand.Int64N(size-20), rand.Int64N(20)
				x.add(off, n)
				for i := off; i < off+n; i++ {
					bits[i] = true
				}
			}
		}
		var want extents
		for i := 0; i < size; i++ {
			if bits[i] {
				if k := len(want) - 1; k >= 0 && want[k].End() == int64(i) {
					want[k].Len++
				} else {
					want = append(want, object.Extent{Off: int64(i), Len: 1})
				}
			}
		}
		if !slices.Equal(x, want) {
			t.Fatalf("round %d: %v, want %v", round, x, want)
		}
		for pos := int64(0); pos < size; pos++ {
			i := x.find(pos)
			if i > 0 && x[i-1].End() > pos || i < len(x) && x[i].End() <= pos {
				t.Fatalf("round %d: find(%d) = %d in %v", round, pos, i, x)
			}
		}
	}
}
