package fs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// BenchmarkReaddirplus lists a directory of 5,000 files as READDIRPLUS
// does (every entry read, then looked up), over an in-memory store;
// b.N counts entries.
func BenchmarkReaddirplus(b *testing.B) {
	_, _, d := newListedDir(b, 5000)
	b.ResetTimer()
	var fh any
	for i := 0; i < b.N; {
		if fh == nil {
			h, _, errno := d.OpendirHandle(b.Context(), 0)
			if errno != 0 {
				b.Fatal(errno)
			}
			fh = h
		}
		h := fh.(*dirHandle)
		de, errno := h.Readdirent(b.Context())
		if errno != 0 {
			b.Fatal(errno)
		}
		if de == nil {
			fh = nil
			continue
		}
		i++
		if de.Name != "." && de.Name != ".." {
			if _, errno := h.Lookup(b.Context(), de.Name, &fuse.EntryOut{}); errno != 0 {
				b.Fatal(errno)
			}
		}
	}
}
