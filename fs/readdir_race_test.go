package fs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// A pausingStore is a meta store that lets a test put a change of the
// mount exactly between the reads of a listing: every listing of prefix
// (a live scan) runs onScan as it starts, and commits wait while held is
// open, so that a change stays queued in the journal.
type pausingStore struct {
	meta.Store
	prefix string

	mu     sync.Mutex
	scans  int
	onScan func(n int) // n counts the listings of prefix, from 1
	held   chan struct{}
}

func (s *pausingStore) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	if o.Live && o.Prefix == s.prefix {
		s.mu.Lock()
		s.scans++
		n, hook := s.scans, s.onScan
		s.mu.Unlock()
		if hook != nil {
			hook(n)
		}
	}
	return s.Store.Scan(ctx, b, o)
}

func (s *pausingStore) Commit(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held != nil {
		<-held
	}
	return s.Store.Commit(ctx, b, ms...)
}

// listen sets the hook run as each listing of the store's prefix starts.
func (s *pausingStore) listen(hook func(n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scans, s.onScan = 0, hook
}

// hold makes commits wait until the returned function is called.
func (s *pausingStore) hold() (release func()) {
	held := make(chan struct{})
	s.mu.Lock()
	s.held = held
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.held = nil
		s.mu.Unlock()
		close(held)
	}
}

// newListedDir returns a mount's state over a pausingStore of the
// directory d/, which holds n files (f0000, f0001, …), and the node of d
// in a tree without a kernel, as the bridge would have made it.
func newListedDir(t testing.TB, n int) (*fsys, *pausingStore, *dirNode) {
	t.Helper()
	s := &pausingStore{Store: mem.New(), prefix: "d/"}
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); s.Close() })
	ctx := t.Context()
	svc := object.New(s, d, object.Options{})
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	f := &fsys{svc: svc, bucket: "bkt", opts: Options{StagingDir: t.TempDir()}, log: slog.Default(),
		invalid: func(string) {}, streams: make(chan struct{}, maxStreams)}
	f.j = newJournal(svc, "bkt", f.log, &f.own, func(string) {})
	t.Cleanup(f.j.close)
	for i := range n {
		if _, err := svc.Put(ctx, "bkt", fmt.Sprintf("d/f%04d", i), strings.NewReader(""), object.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	root := &dirNode{node: node{fsys: f}}
	fusefs.NewNodeFS(root, &fusefs.Options{})
	return f, s, child(t, &root.node, "d").(*dirNode)
}

// child looks name up in the directory of n and adds its inode to the
// tree, as the kernel's bridge does.
func child(t testing.TB, n *node, name string) fusefs.InodeEmbedder {
	t.Helper()
	var out fuse.EntryOut
	ch, errno := n.Operations().(fusefs.NodeLookuper).Lookup(t.Context(), name, &out)
	if errno != 0 {
		t.Fatalf("lookup %s: %v", name, errno)
	}
	n.AddChild(name, ch, false)
	return ch.Operations()
}

// listAll opens the directory and reads its listing to the end.
func listAll(t *testing.T, d *dirNode) []string {
	t.Helper()
	fh, _, errno := d.OpendirHandle(t.Context(), 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	return readRest(t, fh.(*dirHandle), -1)
}

// readRest reads up to n entries of h (all of them if n < 0).
func readRest(t *testing.T, h *dirHandle, n int) []string {
	t.Helper()
	var names []string
	for n < 0 || len(names) < n {
		de, errno := h.Readdirent(t.Context())
		if errno != 0 {
			t.Fatalf("readdir after %d entries: %v", len(names), errno)
		}
		if de == nil {
			break
		}
		names = append(names, de.Name)
	}
	return names
}

// wantOnce checks that a listing holds each of names exactly once.
func wantOnce(t *testing.T, listing []string, names ...string) {
	t.Helper()
	for _, name := range names {
		if n := len(slices.DeleteFunc(slices.Clone(listing), func(s string) bool { return s != name })); n != 1 {
			t.Errorf("%s listed %d times in %d entries", name, n, len(listing))
		}
	}
}

// TestListingKeepsAnEmptyFileReleasedDuringIt: an empty file created and
// closed is committed only at its release (see draft.emptied), which the
// kernel sends after close(2) has returned; until then the mount shows
// it as a file being written. A listing that started after the close
// must show it, whenever the release and the commit come.
func TestListingKeepsAnEmptyFileReleasedDuringIt(t *testing.T) {
	f, s, d := newListedDir(t, 1500) // two pages
	ctx := t.Context()
	var out fuse.EntryOut
	ch, fh, _, errno := d.Create(ctx, "f0500x", syscall.O_CREAT|syscall.O_WRONLY, 0o644, &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	d.AddChild("f0500x", ch, false)
	if errno := fh.(*draftHandle).Flush(ctx); errno != 0 { // close(2)
		t.Fatal(errno)
	}
	// Released and committed once the page that holds its name is read.
	s.listen(func(n int) {
		if n == 2 {
			fh.(*draftHandle).Release(ctx)
			f.j.sync()
		}
	})
	got := listAll(t, d)
	wantOnce(t, got, "f0500x", "f0499", "f1499")
	if len(got) != 1503 {
		t.Errorf("%d entries, want 1503", len(got))
	}
}

// TestListingShowsAChangedFileOnce changes a file listed on the first page
// while the last one is read: the change is queued, not committed, when
// the listing ends, and the file is listed once.
func TestListingShowsAChangedFileOnce(t *testing.T) {
	f, s, d := newListedDir(t, 1500)
	file := child(t, &d.node, "f0001").(*fileNode)
	var release func()
	s.listen(func(n int) {
		if n == 2 {
			release = s.hold()
			in := &fuse.SetAttrIn{}
			in.Valid, in.Mode = fuse.FATTR_MODE, 0o600
			if errno := file.Setattr(t.Context(), nil, in, &fuse.AttrOut{}); errno != 0 {
				t.Error(errno)
			}
		}
	})
	got := listAll(t, d)
	if release == nil {
		t.Fatal("the listing read one page")
	}
	release()
	f.j.sync()
	wantOnce(t, got, "f0001", "f1499")
	if len(got) != 1502 {
		t.Errorf("%d entries, want 1502", len(got))
	}
}

// TestSeekdirBackKeepsItsPlace seeks a listing back to where the kernel
// took its last entry, as go-fuse does when the kernel asks again from an
// offset it did not keep, after an entry before that offset was deleted:
// the listing goes on with the entry after the one the offset names.
func TestSeekdirBackKeepsItsPlace(t *testing.T) {
	f, _, d := newListedDir(t, 40)
	ctx := t.Context()
	fh, _, errno := d.OpendirHandle(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*dirHandle)
	first := readRest(t, h, 10) // . .. f0000 … f0007
	if _, err := f.svc.Delete(ctx, "bkt", "d/f0000", object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if errno := h.Seekdir(ctx, 5); errno != 0 {
		t.Fatal(errno)
	}
	rest := readRest(t, h, -1)
	if len(rest) == 0 || rest[0] != first[5] {
		t.Fatalf("after seekdir to 5 the listing goes on with %q, want %s", rest[:min(len(rest), 1)], first[5])
	}
	wantOnce(t, append(first[:5], rest...), "f0003", "f0039")
}

// TestReaddirplusSkipsFilesChangedSinceTheirPage unlinks a file after
// its page was read and before the kernel takes its entry: READDIRPLUS
// must not answer for it, or the kernel would keep the name as there.
func TestReaddirplusSkipsFilesChangedSinceTheirPage(t *testing.T) {
	_, _, d := newListedDir(t, 10)
	ctx := t.Context()
	fh, _, errno := d.OpendirHandle(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*dirHandle)
	for i := 0; ; i++ {
		if i == 3 { // the page is read
			if errno := d.Unlink(ctx, "f0005"); errno != 0 {
				t.Fatal(errno)
			}
		}
		de, errno := h.Readdirent(ctx)
		if errno != 0 {
			t.Fatal(errno)
		}
		if de == nil {
			break
		}
		if de.Name == "." || de.Name == ".." {
			continue
		}
		ch, errno := h.Lookup(ctx, de.Name, &fuse.EntryOut{})
		if answered, want := ch != nil && errno == 0, de.Name != "f0005"; answered != want {
			t.Errorf("READDIRPLUS of %s answered %v (%v), want %v", de.Name, answered, errno, want)
		}
	}
}
