package fs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// readPlus reads up to max entries of h (all of them if max < 0) as the
// bridge does for READDIRPLUS, and adds the inodes answered to d. With
// stat it looks each entry sent bare up right away, as the kernel does
// when ls -l stats it. It returns how many entries it read and how many
// READDIRPLUS answered.
func readPlus(t *testing.T, h *dirHandle, d *dirNode, max int, stat bool) (listed, answered int) {
	t.Helper()
	for max < 0 || listed < max {
		de, errno := h.Readdirent(t.Context())
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
		ch, errno := h.Lookup(t.Context(), de.Name, &fuse.EntryOut{})
		switch {
		case errno == 0 && ch != nil:
			answered++
			d.AddChild(de.Name, ch, false)
		case stat:
			child(t, &d.node, de.Name)
		}
	}
	return listed, answered
}

// openPlus opens d's listing, with its inode as dir sets it.
func openPlus(t *testing.T, d *dirNode) *dirHandle {
	t.Helper()
	fh, _, errno := d.OpendirHandle(t.Context(), 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*dirHandle)
	h.dir = d.EmbeddedInode()
	return h
}

// TestReaddirplusAnswersAtMostMaxPlusEntries: each entry READDIRPLUS
// answers makes an inode that the kernel keeps until memory runs short,
// so a listing that nobody stats answers its first maxPlus entries
// only, however often it is started over, and sends the rest bare.
func TestReaddirplusAnswersAtMostMaxPlusEntries(t *testing.T) {
	const n = maxPlus + 10
	_, _, d := newListedDir(t, n)
	h := openPlus(t, d)
	if listed, answered := readPlus(t, h, d, maxPlus/2, false); answered != listed {
		t.Fatalf("%d of the first %d entries answered", answered, listed)
	}
	if errno := h.Seekdir(t.Context(), 0); errno != 0 { // rewinddir
		t.Fatal(errno)
	}
	listed, answered := readPlus(t, h, d, -1, false)
	if listed != n || answered != maxPlus-maxPlus/2 {
		t.Errorf("listed over: %d entries, %d answered; want %d, %d", listed, answered, n, maxPlus-maxPlus/2)
	}
	if listed, answered := readPlus(t, openPlus(t, d), d, -1, false); listed != n || answered != maxPlus {
		t.Errorf("a new listing: %d entries, %d answered; want %d, %d", listed, answered, n, maxPlus)
	}
}

// TestReaddirplusAnswersOnForLs: once the kernel has looked up an
// entry the listing sent bare, as it does when ls -l stats it, the
// listing answers maxPlus entries more: their inodes are made anyway.
func TestReaddirplusAnswersOnForLs(t *testing.T) {
	const n = 2*maxPlus + 10
	_, _, d := newListedDir(t, n)
	// The first entry past each maxPlus answered goes bare and is
	// looked up; the next one finds it was.
	if listed, answered := readPlus(t, openPlus(t, d), d, -1, true); listed != n || answered != n-2 {
		t.Errorf("%d entries, %d answered; want %d, %d", listed, answered, n, n-2)
	}
}
