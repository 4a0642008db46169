package fs

import (
	"slices"
	"sort"

	"github.com/stratafs/stratafs/object"
)

// extents is a set of byte ranges kept sorted, disjoint and not touching:
// the parts of a file written since its last commit. Its length grows with
// the number of separate writes, not with the bytes written.
type extents []object.Extent

// add inserts [off, off+n), merging it with the ranges it overlaps or
// touches.
func (x *extents) add(off, n int64) {
	if n <= 0 {
		return
	}
	e := object.Extent{Off: off, Len: n}
	s := *x
	i := sort.Search(len(s), func(i int) bool { return s[i].End() >= e.Off })
	j := i
	for ; j < len(s) && s[j].Off <= e.End(); j++ {
		lo, hi := min(e.Off, s[j].Off), max(e.End(), s[j].End())
		e = object.Extent{Off: lo, Len: hi - lo}
	}
	*x = slices.Replace(s, i, j, e)
}

// cut drops every byte at or past size.
func (x *extents) cut(size int64) {
	s := *x
	i := sort.Search(len(s), func(i int) bool { return s[i].End() > size })
	if i < len(s) && s[i].Off < size {
		s[i].Len = size - s[i].Off
		i++
	}
	*x = s[:i]
}

// find returns the index of the first range that ends past pos: the one
// holding pos, or the next one after it (len(x) when there is none).
func (x extents) find(pos int64) int {
	return sort.Search(len(x), func(i int) bool { return x[i].End() > pos })
}
