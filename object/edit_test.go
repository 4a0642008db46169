package object_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// edit applies o to the latest version of key, with src holding the
// edited bytes, and checks the result reads back as src.
func (f *fixture) edit(key string, src []byte, dirty ...object.Extent) *meta.Version {
	f.t.Helper()
	base, err := f.svc.Head(f.ctx, "bkt", key, "")
	if err != nil {
		f.t.Fatal(err)
	}
	v, err := f.svc.Edit(f.ctx, "bkt", key, base, object.EditOptions{
		Size:  int64(len(src)),
		Dirty: dirty,
		Src:   bytes.NewReader(src),
	})
	if err != nil {
		f.t.Fatalf("edit %s: %v", key, err)
	}
	if got := f.mustRead(key, ""); !bytes.Equal(got, src) {
		f.t.Fatalf("edit %s: read back differs", key)
	}
	if !strings.HasSuffix(v.ETag, "-0") || v.Size != int64(len(src)) {
		f.t.Fatalf("edit %s: etag %q size %d", key, v.ETag, v.Size)
	}
	return v
}

func TestEditRewritesOnlyTheTouchedChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(4*chunk + 100)
	f.put("k", body)
	chunks := f.chunks()

	// Two edits within one chunk and one in another: two chunks written,
	// the first not twice.
	body = bytes.Clone(body)
	body[2*chunk+5] ^= 0xff
	body[2*chunk+900] ^= 0xff
	body[4*chunk+1] ^= 0xff
	f.edit("k", body, object.Extent{Off: 2*chunk + 5, Len: 1}, object.Extent{Off: 2*chunk + 900, Len: 1},
		object.Extent{Off: 4*chunk + 1, Len: 1})
	if got := f.chunks(); got != chunks+2 {
		t.Errorf("chunks = %d, want %d", got, chunks+2)
	}

	// Cutting shares everything; growing by bytes nobody wrote makes a
	// hole, which writes nothing; growing by bytes written writes them.
	chunks = f.chunks()
	body = body[:chunk+10]
	f.edit("k", body)
	if got := f.chunks(); got != chunks {
		t.Errorf("truncation wrote chunks: %d, want %d", got, chunks)
	}
	body = append(body, make([]byte, 3*chunk)...)
	f.edit("k", body)
	if got := f.chunks(); got != chunks {
		t.Errorf("growth by a hole: chunks = %d, want %d", got, chunks)
	}
	end := int64(len(body))
	body = append(body, randBytes(chunk)...)
	f.edit("k", body, object.Extent{Off: end, Len: chunk})
	if got := f.chunks(); got != chunks+1 {
		t.Errorf("growth by a written chunk: chunks = %d, want %d", got, chunks+1)
	}
}

func TestEditFailingCheckLeavesNoChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(3 * chunk)
	base := f.put("k", body)
	chunks := f.chunks()
	refuse := errors.New("refused")
	_, err := f.svc.Edit(f.ctx, "bkt", "k", base, object.EditOptions{
		Size:  int64(len(body)),
		Dirty: []object.Extent{{Off: 10, Len: 5}},
		Src:   bytes.NewReader(body),
		Check: func(*meta.Version) error { return refuse },
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("edit = %v, want the check's error", err)
	}
	if got := f.chunks(); got != chunks {
		t.Errorf("chunks = %d after a failed edit, want %d", got, chunks)
	}
}

func TestReaderAtReadsAVersion(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(2*chunk + 7)
	v := f.put("k", body)
	f.put("k", []byte("newer"))
	r, err := f.svc.ReaderAt(f.ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 100)
	if n, err := r.ReadAt(f.ctx, p, chunk-50); n != len(p) || err != nil || !bytes.Equal(p, body[chunk-50:chunk+50]) {
		t.Fatalf("read across a chunk edge: %d, %v", n, err)
	}
}
