package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

func open(t testing.TB, dir string) *Store { return openWith(t, dir, Options{}) }

func openWith(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) data.Store { return open(t, t.TempDir()) })
}

func TestContractDirectIO(t *testing.T) {
	storetest.Run(t, func(t *testing.T) data.Store { return openWith(t, t.TempDir(), Options{DirectIO: true}) })
}

// count returns how many chunks Walk sees.
func count(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.Walk(context.Background(), func(data.ChunkID, int64, time.Time) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want := storetest.Random(1, 3*64<<10+17)
	w, err := data.Write(ctx, open(t, dir), bytes.NewReader(want), data.WriteOptions{ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if n := count(t, s); n != 4 {
		t.Fatalf("reopened store holds %d chunks, want 4", n)
	}
	r := data.NewReader(ctx, s, w.Manifest, 0, -1)
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back after reopen: %d bytes, %v", len(got), err)
	}
	id := data.ChunkID(w.Manifest.Chunks[0].Id)
	if _, err := os.Stat(filepath.Join(dir, "chunks", id.String()[:2], id.String())); err != nil {
		t.Fatalf("chunk not where the layout says: %v", err)
	}
}

// A Put failing mid-write (a full disk) leaves nothing behind: no chunk
// under its name, no temporary file.
func TestPutFails(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.write = func(f *os.File, b []byte) (int, error) {
		n, err := f.Write(b[:len(b)/2])
		if err != nil {
			return n, err
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	id := data.NewChunkID()
	err := s.Put(context.Background(), id, storetest.Random(1, 1000))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "put chunk "+id.String()) {
		t.Fatalf("Put on a full disk: %v", err)
	}
	if _, err := s.ReadAt(context.Background(), id, make([]byte, 1), 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("chunk of a failed Put: %v, want ErrNoSuchChunk", err)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) != 0 || count(t, s) != 0 {
		t.Fatalf("failed Put left %d temporary files, %d chunks", len(tmp), count(t, s))
	}
}

func TestOpenCleansTmp(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	stale, fresh := filepath.Join(dir, "tmp", "stale"), filepath.Join(dir, "tmp", "fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file (a Put in flight?) removed by Open: %v", err)
	}
}

// Walk reports chunks only: not strays, nor chunks out of their place.
func TestWalkSkipsStrays(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(context.Background(), data.NewChunkID(), []byte("chunk")); err != nil {
		t.Fatal(err)
	}
	misplaced := "00" + strings.Repeat("1", 30)
	for _, p := range []string{"ab/notes.txt", "11/" + misplaced, "ab/" + strings.ToUpper("ab"+strings.Repeat("c", 30))} {
		if err := os.WriteFile(filepath.Join(dir, "chunks", p), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s); n != 1 {
		t.Fatalf("Walk saw %d chunks, want 1", n)
	}
}

// data.Write streams to chunk files: a write failing in the middle of a
// chunk (a full disk) fails it, leaving no chunk and no temporary file.
func TestWriteFails(t *testing.T) {
	const cs = 1 << 20
	body := storetest.Random(1, 3*cs+5)
	for _, at := range []int64{100 << 10, cs + 300<<10, 3 * cs} { // in the 1st, 2nd and last chunk
		dir := t.TempDir()
		s := open(t, dir)
		var written int64
		s.write = func(f *os.File, b []byte) (int, error) {
			if written += int64(len(b)); written > at {
				return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
			}
			return f.Write(b)
		}
		_, err := data.Write(context.Background(), s, bytes.NewReader(body), data.WriteOptions{ChunkSize: cs})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("disk full after %d bytes: Write returned %v", at, err)
		}
		if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) != 0 || count(t, s) != 0 {
			t.Fatalf("disk full after %d bytes: failed Write left %d temporary files, %d chunks", at, len(tmp), count(t, s))
		}
	}
}

// data.Write holds no chunk in memory over a Store: the body goes to the
// chunk files a piece at a time.
func TestWriteHoldsNoChunk(t *testing.T) {
	const (
		cs   = 8 << 20
		size = 64 << 20
	)
	s := open(t, t.TempDir())
	var ms runtime.MemStats
	runtime.GC() // twice: pools keep buffers over one collection
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	body := &sampler{r: io.LimitReader(rand.NewChaCha8([32]byte{1}), size)}
	if _, err := data.Write(context.Background(), s, body, data.WriteOptions{ChunkSize: cs}); err != nil {
		t.Fatal(err)
	}
	peak := body.peak
	t.Logf("heap grew by at most %.1f MiB", float64(max(peak, base)-base)/(1<<20))
	if peak > base+cs/2 {
		t.Errorf("heap grew by %d MiB writing %d MiB in %d MiB chunks: a chunk is held in memory", (peak-base)>>20, size>>20, cs>>20)
	}
}

// A sampler is a body that samples the live heap every 1 MiB read.
type sampler struct {
	r    io.Reader
	n    int
	peak uint64
	ms   runtime.MemStats
}

func (s *sampler) Read(p []byte) (int, error) {
	k, err := s.r.Read(p)
	if s.n += k; s.n >= 1<<20 {
		s.n = 0
		runtime.GC()
		runtime.ReadMemStats(&s.ms)
		s.peak = max(s.peak, s.ms.HeapAlloc)
	}
	return k, err
}

// TestDiskGone: with the store's directories gone (its disk unmounted),
// or a disk failing with EIO, every operation fails with
// data.ErrUnavailable, never data.ErrNoSuchChunk (which would say a
// chunk was lost), and nothing is deleted; once they are back, it works
// as before.
func TestDiskGone(t *testing.T) {
	ctx := context.Background()
	disk := t.TempDir()
	dir := filepath.Join(disk, "data")
	s := open(t, dir)
	id := data.NewChunkID()
	body := storetest.Random(1, 1000)
	if err := s.Put(ctx, id, body); err != nil {
		t.Fatal(err)
	}
	away := filepath.Join(disk, "away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	unavailable := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, data.ErrUnavailable) || errors.Is(err, data.ErrNoSuchChunk) {
			t.Errorf("%s: %v, want ErrUnavailable", op, err)
		}
	}
	_, err := s.ReadAt(ctx, id, make([]byte, 10), 0)
	unavailable("ReadAt with the disk gone", err)
	_, err = s.OpenChunk(id)
	unavailable("OpenChunk with the disk gone", err)
	unavailable("Put with the disk gone", s.Put(ctx, data.NewChunkID(), body))
	unavailable("Delete with the disk gone", s.Delete(ctx, id))
	unavailable("Walk with the disk gone", s.Walk(ctx, func(data.ChunkID, int64, time.Time) error { return nil }))

	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(body))
	if n, err := s.ReadAt(ctx, id, got, 0); n != len(body) || !bytes.Equal(got, body) {
		t.Fatalf("ReadAt with the disk back: %d bytes, %v", n, err)
	}
	if _, err := s.ReadAt(ctx, data.NewChunkID(), got, 0); !errors.Is(err, data.ErrNoSuchChunk) || errors.Is(err, data.ErrUnavailable) {
		t.Fatalf("ReadAt of a chunk never written: %v, want ErrNoSuchChunk", err)
	}
	if err := s.Delete(ctx, data.NewChunkID()); err != nil {
		t.Fatalf("Delete of a chunk never written: %v", err)
	}

	s.write = func(f *os.File, b []byte) (int, error) {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
	}
	unavailable("Put on a failing disk", s.Put(ctx, data.NewChunkID(), body))
}
