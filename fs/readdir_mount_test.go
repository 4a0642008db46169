package fs

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
)

// lookupCounter counts the LOOKUPs of names starting with f in go-fuse's
// debug log, which writes one line per request.
type lookupCounter struct{ n atomic.Int64 }

func (c *lookupCounter) Write(line []byte) (int, error) {
	if bytes.Contains(line, []byte(": LOOKUP ")) && bytes.Contains(line, []byte(` "f`)) {
		c.n.Add(1)
	}
	return len(line), nil
}

// TestReaddirplusOnAMount lists a directory on a real mount and stats
// every name, as ls -l does: the kernel is told the attributes of the
// first maxPlus entries and looks none of them up; it looks each of the
// others up, and only then does the server make their inodes.
func TestReaddirplusOnAMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip(err)
	}
	for _, n := range []int{100, maxPlus + 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f, _, _ := newListedDir(t, n)
			// Nothing the kernel is told expires while the test runs.
			f.opts.EntryTimeout, f.opts.AttrTimeout = time.Hour, time.Hour
			var lookups lookupCounter
			opts := f.fuseOptions()
			opts.Debug, opts.MountOptions.Logger = true, log.New(&lookups, "", 0)
			root := f.newRoot()
			mnt := t.TempDir()
			server, err := fusefs.Mount(mnt, root, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := server.Unmount(); err != nil {
					t.Error(err)
				}
			})
			dir := filepath.Join(mnt, "d")
			d, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			names, err := d.Readdirnames(-1)
			d.Close()
			if err != nil || len(names) != n {
				t.Fatalf("%d names (%v), want %d", len(names), err, n)
			}
			bare := max(0, n-maxPlus)
			if got := len(root.EmbeddedInode().GetChild("d").Children()); got != n-bare {
				t.Errorf("the listing made %d inodes, want %d", got, n-bare)
			}
			for _, name := range names {
				if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			if got := lookups.n.Load(); got != int64(bare) {
				t.Errorf("lstat of each name made %d lookups, want %d", got, bare)
			}
		})
	}
}
