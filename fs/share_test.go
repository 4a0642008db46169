package fs

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestRenameNamesTheBytes: a rename of a committed file queues a version
// naming the version whose bytes it shares (meta.Version.ManifestOf)
// instead of reading them first, whether a listing showed the file (a
// page read ahead answers for it) or not (the store does). While it is
// queued its bytes are read through the version it names; once it has
// committed, and removed that version (the bucket is unversioned), from
// the store.
func TestRenameNamesTheBytes(t *testing.T) {
	t.Run("listed", func(t *testing.T) { renameNamesTheBytes(t, true) })
	t.Run("unlisted", func(t *testing.T) { renameNamesTheBytes(t, false) })
}

func renameNamesTheBytes(t *testing.T, listed bool) {
	f, s, d := newListedDir(t, 3)
	ctx := t.Context()
	body := bytes.Repeat([]byte("bytes of a small file "), 200)
	if _, err := f.svc.Put(ctx, "bkt", "d/small", bytes.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if listed {
		f.opts.EntryTimeout = time.Minute // a page read ahead answers for the rename
		// Lookups in listing order make a walk of the directory, which
		// reads its pages ahead of the lookups that follow.
		for _, name := range []string{"f0000", "f0001", "f0002"} {
			child(t, &d.node, name)
		}
		for start := time.Now(); ; time.Sleep(time.Millisecond) {
			if _, ok := f.peek("d/", "d/small"); ok {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatal("no page of d/ was read ahead")
			}
		}
	}
	n := child(t, &d.node, "small").(*fileNode)
	expectBody := func(when string) {
		t.Helper()
		n.mu.Lock()
		v := n.v
		n.mu.Unlock()
		w, err := f.whole(ctx, v)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		r, err := f.svc.ReaderAt(ctx, w)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer r.Close()
		got := make([]byte, len(body)+1)
		if k, _ := r.ReadAt(ctx, got, 0); !bytes.Equal(got[:k], body) {
			t.Fatalf("%s: read %d other bytes, want the %d renamed", when, k, len(body))
		}
	}

	// Until released, commits wait: the journal cannot close before.
	release := sync.OnceFunc(s.hold())
	defer release()
	if errno := n.rename(ctx, "d/small", "d/moved"); errno != 0 {
		t.Fatal(errno)
	}
	n.mu.Lock()
	q := f.j.queued("d/moved", n.v.ID)
	n.mu.Unlock()
	if q == nil || q.ManifestOf == nil || q.Manifest != nil {
		t.Fatalf("queued rename %+v: want a version naming the bytes it shares", q)
	}
	expectBody("while queued")
	release()
	if err := f.j.sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Head(ctx, "bkt", "d/small", meta.NullVersion); err == nil {
		t.Fatal("d/small still has its null version after the rename")
	}
	expectBody("once committed")
}
