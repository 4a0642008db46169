package object_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// TestReadersHoldChunks: every way of opening a version holds its chunks
// until closed, a guard installed by a collector is shown them and can
// refuse the open, and a refused open holds nothing.
func TestReadersHoldChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v := f.put("k", randBytes(2*chunk+7))
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	ids := m.ChunkIDs()
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
