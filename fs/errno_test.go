package fs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestInterruptedReadsAnswer runs a lookup, a getattr and a listing with
// the request's context cancelled, as the kernel's FUSE_INTERRUPT leaves
// it: each still answers, since callers such as rename(2) do not retry
// an EINTR.
func TestInterruptedReadsAnswer(t *testing.T) {
	f := newTestFsys(t)
	if _, err := f.svc.Put(t.Context(), "bkt", "d/a", strings.NewReader("x"), object.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	root := &dirNode{node: node{fsys: f}}
	fusefs.NewNodeFS(root, &fusefs.Options{}) // gives root its inode
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	var entry fuse.EntryOut
	ch, errno := root.Lookup(ctx, "d", &entry)
	if errno != 0 {
		t.Fatalf("interrupted lookup of d: %v", errno)
	}
	root.AddChild("d", ch, false) // as the kernel's bridge does
	d := ch.Operations().(*dirNode)
	d.forget() // the getattr reads the store
	var attr fuse.AttrOut
	if errno := d.Getattr(ctx, nil, &attr); errno != 0 {
		t.Fatalf("interrupted getattr of d: %v", errno)
	}
	fh, _, errno := d.OpendirHandle(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	var names []string
	for {
		de, errno := fh.(*dirHandle).Readdirent(ctx)
		if errno != 0 {
			t.Fatalf("interrupted readdir of d after %q: %v", names, errno)
		}
		if de == nil {
			break
		}
		names = append(names, de.Name)
	}
	if strings.Join(names, " ") != ". .. a" {
		t.Errorf("interrupted readdir of d: %q", names)
	}
}

// TestUnavailableStoresAreEIO: a store that did not answer within its
// timeout is EIO, not the EINTR of a cancelled request, whichever store.
func TestUnavailableStoresAreEIO(t *testing.T) {
	f := newTestFsys(t)
	for _, sentinel := range []error{meta.ErrUnavailable, data.ErrUnavailable} {
		err := fmt.Errorf("read: %w: %w", sentinel, context.DeadlineExceeded)
		if errno := f.errno("read", err); errno != syscall.EIO {
			t.Errorf("errno(%v) = %v, want EIO", err, errno)
		}
	}
}

// TestFailedCommitErrno: a commit that failed on a full disk says so to
// close and fsync; any other failure is EIO.
func TestFailedCommitErrno(t *testing.T) {
	for err, want := range map[error]syscall.Errno{
		fmt.Errorf("put b/k: put chunk 0f: %w", &os.PathError{Op: "write", Path: "/d/tmp/1", Err: syscall.ENOSPC}): syscall.ENOSPC,
		fmt.Errorf("put b/k: %w", &os.PathError{Op: "write", Path: "/d/meta.db", Err: syscall.EDQUOT}):             syscall.EDQUOT,
		fmt.Errorf("put b/k: %w", syscall.EROFS):                                                                   syscall.EIO,
		fmt.Errorf("put b/k: %w", meta.ErrUnavailable):                                                             syscall.EIO,
	} {
		if got := failedCommit(err); got != want {
			t.Errorf("failedCommit(%v) = %v, want %v", err, got, want)
		}
	}
}
