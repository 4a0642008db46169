package fs

import (
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// TestPageCacheTrust: the kernel's page cache of a file is kept on open
// only while it can hold nothing but the version opened. A handle of an
// older version may fill it with that version's bytes until it is
// released, even after a newer version was opened and recorded as cached.
func TestPageCacheTrust(t *testing.T) {
	old, cur := meta.VersionID{1}, meta.VersionID{2}
	n := &fileNode{cached: cur, reading: map[meta.VersionID]int{old: 1, cur: 1}}
	if onlyReading(n.reading, cur) {
		t.Fatal("a handle of an older version is open, yet the cache is trusted")
	}
	n.closed(old)
	if n.cached == cur {
		t.Fatal("the older version's handle is released, yet the cache is still taken to hold the current version")
	}
	n.cached = cur
	n.closed(cur)
	if n.cached != cur || !onlyReading(n.reading, cur) {
		t.Fatal("the current version's handle, released, made the cache untrusted")
	}
	n.reading[cur] = 2
	if !onlyReading(n.reading, cur) {
		t.Fatal("two handles of the current version: the cache is not trusted")
	}
}
