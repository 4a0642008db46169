package fs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReaddirplusAnswersAtMostMaxPlusEntries: each entry READDIRPLUS
// answers makes an inode that the kernel keeps until memory runs short,
// so one listing answers its first maxPlus entries only, however often
// it is started over, and sends the rest bare.
func TestReaddirplusAnswersAtMostMaxPlusEntries(t *testing.T) {
	const n = maxPlus + 10
	_, _, d := newListedDir(t, n)
	ctx := t.Context()
	fh, _, errno := d.OpendirHandle(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*dirHandle)
	// plus reads up to max entries of h as the bridge does (all if max
	// < 0) and counts those listed and those answered with an inode.
	plus := func(h *dirHandle, max int) (listed, answered int) {
		for max < 0 || listed < max {
			de, errno := h.Readdirent(ctx)
			if errno != 0 {
				t.Fatal(errno)
			}
			if de == nil {
				break
			}
			if de.Name == "." || de.Name == ".." { // not looked up
				continue
			}
			listed++
			if ch, errno := h.Lookup(ctx, de.Name, &fuse.EntryOut{}); errno == 0 && ch != nil {
				answered++
			}
		}
		return listed, answered
	}
	if listed, answered := plus(h, maxPlus/2); answered != listed {
		t.Fatalf("%d of the first %d entries answered", answered, listed)
	}
	if errno := h.Seekdir(ctx, 0); errno != 0 { // rewinddir
		t.Fatal(errno)
	}
	listed, answered := plus(h, -1)
	if listed != n || answered != maxPlus-maxPlus/2 {
		t.Errorf("listed over: %d entries, %d answered; want %d, %d", listed, answered, n, maxPlus-maxPlus/2)
	}
	fh, _, errno = d.OpendirHandle(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if listed, answered := plus(fh.(*dirHandle), -1); listed != n || answered != maxPlus {
		t.Errorf("a new listing: %d entries, %d answered; want %d, %d", listed, answered, n, maxPlus)
	}
}
