package fs

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// The kernel sends a file's RELEASE after close(2) has returned, and a
// file created or truncated empty commits only then (draft.emptied). The
// bridge drops a name from its tree only after Unlink or Rename has
// returned. A release that comes in between, as the next call of a
// program that closed, then removed or replaced the file (git's lock
// files: create, close, unlink, create again with O_EXCL), must not
// commit to the name the file no longer has.

// emptied opens name in d for writing, truncates it to nothing and closes
// it, as `: > name` does: the handle is returned unreleased.
func emptied(t *testing.T, d *dirNode, name string) *draftHandle {
	t.Helper()
	ctx := t.Context()
	var h *draftHandle
	if ch := d.GetChild(name); ch != nil {
		fh, _, errno := ch.Operations().(*fileNode).Open(ctx, syscall.O_WRONLY)
		if errno != 0 {
			t.Fatal(errno)
		}
		h = fh.(*draftHandle)
		in := &fuse.SetAttrIn{}
		in.Valid, in.Size = fuse.FATTR_SIZE, 0
		if errno := h.n.Setattr(ctx, h, in, &fuse.AttrOut{}); errno != 0 {
			t.Fatal(errno)
		}
	} else {
		var out fuse.EntryOut
		ch, fh, _, errno := d.Create(ctx, name, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, 0o644, &out)
		if errno != 0 {
			t.Fatal(errno)
		}
		d.AddChild(name, ch, false)
		h = fh.(*draftHandle)
	}
	if errno := h.Flush(ctx); errno != 0 {
		t.Fatal(errno)
	}
	return h
}

func putFile(t *testing.T, f *fsys, d *dirNode, name, body string) {
	t.Helper()
	if _, err := f.svc.Put(t.Context(), "bkt", "d/"+name, strings.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	child(t, &d.node, name)
}

func wantBody(t *testing.T, f *fsys, key, want string) {
	t.Helper()
	if err := f.j.sync(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := f.svc.Head(ctx, "bkt", key, "")
	if want == "" {
		switch {
		case err == nil:
			t.Fatalf("%s has version %v (%d bytes), want it gone", key, v.ID, v.Size)
		case !meta.IsNotFound(err):
			t.Fatalf("%s: %v", key, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	r, err := f.svc.ReaderAt(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, len(want)+1)
	if n, _ := r.ReadAt(ctx, got, 0); string(got[:n]) != want {
		t.Fatalf("%s holds %q, want %q", key, got[:n], want)
	}
}

func TestReleaseAfterUnlink(t *testing.T) {
	for _, committed := range []bool{false, true} { // a new file; one truncated
		f, _, d := newListedDir(t, 1)
		if committed {
			putFile(t, f, d, "config.lock", "old lines")
		}
		h := emptied(t, d, "config.lock")
		if errno := d.Unlink(t.Context(), "config.lock"); errno != 0 {
			t.Fatal(errno)
		}
		h.Release(t.Context())
		wantBody(t, f, "d/config.lock", "")
	}
}

func TestReleaseAfterRenameOverTheFile(t *testing.T) {
	f, _, d := newListedDir(t, 1)
	putFile(t, f, d, "dst", "old")
	putFile(t, f, d, "src", "new")
	h := emptied(t, d, "dst")
	if errno := d.Rename(t.Context(), "src", d, "dst", 0); errno != 0 {
		t.Fatal(errno)
	}
	h.Release(t.Context())
	wantBody(t, f, "d/dst", "new")
	wantBody(t, f, "d/src", "")
}
