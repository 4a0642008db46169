package object_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// putChunked puts a body of three chunks at key and returns its version
// and their ids.
func (f *fixture) putChunked(key string) (*meta.Version, []data.ChunkID) {
	f.t.Helper()
	v := f.put(key, randBytes(2*chunk+7))
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		f.t.Fatal(err)
	}
	return v, m.ChunkIDs()
}

// TestReadersHoldChunks: every way of opening a version holds its chunks
// until closed, a guard installed by a collector is shown them and can
// refuse the open, and a refused open holds nothing.
func TestReadersHoldChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v, ids := f.putChunked("k")
	held := func() int {
		n := 0
		for _, id := range ids {
			if f.svc.Reading(id) {
				n++
			}
		}
		return n
	}

	obj, err := f.svc.Get(f.ctx, "bkt", "k", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.ReaderAt(f.ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if held() != len(ids) {
		t.Fatalf("%d of %d chunks held by open readers", held(), len(ids))
	}
	if _, err := io.Copy(io.Discard, obj.Body); err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	if held() != len(ids) {
		t.Fatal("closing one reader released the other's chunks")
	}
	r.Close()
	r.Close()
	if held() != 0 {
		t.Fatalf("%d chunks held after every reader closed", held())
	}

	gone := errors.New("collected")
	var shown []data.ChunkID
	remove := f.svc.GuardChunks(func(_ context.Context, got []data.ChunkID) error {
		shown = got
		return gone
	})
	if _, err := f.svc.ReaderAt(f.ctx, v); !errors.Is(err, gone) {
		t.Fatalf("ReaderAt with a refusing guard: %v", err)
	}
	if _, _, err := f.svc.Open(f.ctx, v, 0, -1); !errors.Is(err, gone) {
		t.Fatalf("Open with a refusing guard: %v", err)
	}
	remove()
	if len(shown) != len(ids) || held() != 0 {
		t.Fatalf("guard shown %d of %d chunks; %d held after refused opens", len(shown), len(ids), held())
	}

	small := f.put("small", []byte("inline")) // no chunks: nothing to hold
	body, _, err := f.svc.Open(f.ctx, small, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
}

// TestGuardSeesSharedChunks: a rename or a change of attributes of a
// version known by its attributes only names the version whose bytes it
// shares, and the collector's guard is still shown those bytes' chunks
// before the commit (a rename may move a key's only row behind the
// collector's scan); a guard that refuses them aborts the commit.
func TestGuardSeesSharedChunks(t *testing.T) {
	f := newFixture(t, meta.Unversioned)
	v, want := f.putChunked("k")
	listed := *v
	listed.DropManifest()

	gone := errors.New("collected")
	var shown []data.ChunkID
	refuse := false
	remove := f.svc.GuardChunks(func(_ context.Context, got []data.ChunkID) error {
		shown = got
		if refuse {
			return gone
		}
		return nil
	})
	defer remove()
	expectShown := func(op string) {
		t.Helper()
		if len(shown) != len(want) {
			t.Fatalf("%s: guard shown %d chunks, want the %d shared", op, len(shown), len(want))
		}
		for i := range want {
			if shown[i] != want[i] {
				t.Fatalf("%s: guard shown chunk %s, want %s", op, shown[i], want[i])
			}
		}
		shown = nil
	}

	refuse = true
	if _, err := f.svc.RenameVersion(f.ctx, "bkt", &listed, "moved", ""); !errors.Is(err, gone) {
		t.Fatalf("rename refused by the guard: %v", err)
	}
	expectShown("refused rename")
	if _, err := f.svc.Head(f.ctx, "bkt", "moved", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Fatalf("destination of a refused rename: %v", err)
	}
	refuse = false
	if _, err := f.svc.ReplaceAttrs(f.ctx, "bkt", &listed, object.Attrs{UserMeta: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	expectShown("change of attributes")
}
