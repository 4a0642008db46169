package integration

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/fs"
)

// chunkBytes returns the bytes the mount's chunk store holds.
func (f *fuseMount) chunkBytes() int64 {
	f.t.Helper()
	var n int64
	err := f.svc.Data().Walk(f.ctx, func(_ data.ChunkID, size int64, _ time.Time) error {
		n += size
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// Sparse files cost what was written, not their size: `truncate -s` and a
// write far past the end store no chunk of zeros, and the holes read as
// zeros through the mount and from the core (what S3 GET serves).
func TestFUSESparseFiles(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	const size = 64 << 20 // a thousand chunks of fuseChunk

	start := f.chunkBytes()
	if out, err := exec.Command("truncate", "-s", "64M", f.path("img")).CombinedOutput(); err != nil {
		t.Fatalf("truncate -s 64M: %v: %s", err, out)
	}
	if fi, err := os.Stat(f.path("img")); err != nil || fi.Size() != size {
		t.Fatalf("img after truncate -s: %v, %v", fi, err)
	}
	zeros := make([]byte, size)
	if !bytes.Equal(f.stored("img"), zeros) {
		t.Fatal("img: the core reads other bytes than zeros")
	}
	if grown := f.chunkBytes() - start; grown > 0 {
		t.Errorf("truncate -s 64M stored %d bytes of chunks, want none", grown)
	}

	// Seek and write past the end of a file that has bytes: the gap
	// stores nothing; the bytes around it at most a chunk each.
	f.write("log", bytes.Repeat([]byte("head"), 1024))
	start = f.chunkBytes()
	w, err := os.OpenFile(f.path("log"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("tail"), size); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte("head"), 1024), make([]byte, size-4096)...)
	want = append(want, "tail"...)
	if !bytes.Equal(f.stored("log"), want) {
		t.Fatal("log: the core reads other bytes than written")
	}
	if grown := f.chunkBytes() - start; grown > 2*fuseChunk {
		t.Errorf("a 4-byte write 64 MiB past the end stored %d bytes of chunks, want at most %d", grown, 2*fuseChunk)
	}

	// A body of zeros put through the core, as S3 PUT does, is stored
	// as holes too, and the mount, which has not read it before, reads
	// the holes as zeros and the bytes around them from the chunks.
	body := append(bytes.Repeat([]byte{'a'}, fuseChunk), make([]byte, 20*fuseChunk)...)
	body = append(body, bytes.Repeat([]byte{'z'}, 100)...)
	start = f.chunkBytes()
	f.put("put", body)
	if grown := f.chunkBytes() - start; grown != fuseChunk+100 {
		t.Errorf("a body of 20 chunks of zeros between %d bytes stored %d bytes of chunks", fuseChunk+100, grown)
	}
	r, err := os.Open(f.path("put"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, off := range []int64{fuseChunk - 50, 10 * fuseChunk, int64(len(body)) - 150} {
		p := make([]byte, 100)
		if n, err := r.ReadAt(p, off); n != len(p) || !bytes.Equal(p, body[off:off+100]) {
			t.Errorf("pread at %d through the mount: %d bytes, %v; wrong bytes", off, n, err)
		}
	}
	if got := f.read("put"); !bytes.Equal(got, body) {
		t.Error("put: read through the mount differs")
	}
}
