package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// recordWrites makes s note, for each write to a chunk file, whether the
// kernel had direct I/O on for the file (its O_DIRECT flag) as it wrote.
func recordWrites(t *testing.T, s *Store) *[]bool {
	t.Helper()
	var got []bool
	s.write = func(f *os.File, b []byte) (int, error) {
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Errorf("F_GETFL: %v", err)
		}
		got = append(got, fl&unix.O_DIRECT != 0)
		return f.Write(b)
	}
	return &got
}

// skipBuffered skips a test that expects direct writes where the file
// system of its store refused them.
func skipBuffered(t *testing.T, s *Store) {
	t.Helper()
	if s.buffered.Load() {
		t.Skipf("the file system of %s refuses O_DIRECT: nothing is written direct here", s.tmp)
	}
}

// alignedRandom returns n random bytes at an address aligned for direct
// I/O, plus shift.
func alignedRandom(seed uint64, n, shift int) []byte {
	b := make([]byte, n+2*align)
	k := (align - int(uintptr(unsafe.Pointer(&b[0]))%align)) % align
	b = b[k+shift : k+shift+n]
	copy(b, storetest.Random(seed, n))
	return b
}

// checkChunk checks that chunk id holds exactly want.
func checkChunk(t *testing.T, s *Store, id data.ChunkID, want []byte) {
	t.Helper()
	f, err := s.OpenChunk(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("chunk read back: %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}

// Chunk files are written direct while their writes stay aligned, and
// through the page cache from the first write that is not; either way
// they read back as written.
func TestDirectWrites(t *testing.T) {
	const p = 64 << 10
	for _, c := range []struct {
		name   string
		shift  int   // of the bytes' address from an aligned one
		pieces []int // lengths of the writes; 0: one Put
		want   []bool
	}{
		{"aligned", 0, []int{p, p, 2 * p}, []bool{true, true, true}},
		{"unaligned tail", 0, []int{p, p, 1000}, []bool{true, true, false}},
		{"buffered for good", 0, []int{align + 1, align - 1, p}, []bool{false, false, false}},
		{"unaligned address", 1, []int{p, p}, []bool{false, false}},
		{"Put aligned", 0, []int{0, 16 * align}, []bool{true}},
		{"Put odd length", 0, []int{0, 3*align + 1}, []bool{false}},
		{"Put unaligned address", 8, []int{0, 16 * align}, []bool{false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openWith(t, t.TempDir(), Options{DirectIO: true})
			got := recordWrites(t, s)
			id := data.NewChunkID()
			var body []byte
			if c.pieces[0] == 0 {
				body = alignedRandom(1, c.pieces[1], c.shift)
				if err := s.Put(ctx, id, body); err != nil {
					t.Fatal(err)
				}
			} else {
				w, err := s.CreateChunk(id)
				if err != nil {
					t.Fatal(err)
				}
				body = alignedRandom(1, sum(c.pieces), c.shift)
				rest := body
				for _, n := range c.pieces {
					if _, err := w.Write(rest[:n]); err != nil {
						t.Fatal(err)
					}
					rest = rest[n:]
				}
				if err := w.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			checkChunk(t, s, id, body)
			skipBuffered(t, s)
			if !slices.Equal(*got, c.want) {
				t.Errorf("writes went direct: %v, want %v", *got, c.want)
			}
		})
	}
}

// Without Options.DirectIO every write goes through the page cache.
func TestBufferedByDefault(t *testing.T) {
	s := open(t, t.TempDir())
	got := recordWrites(t, s)
	id := data.NewChunkID()
	body := alignedRandom(2, 16*align, 0)
	if err := s.Put(context.Background(), id, body); err != nil {
		t.Fatal(err)
	}
	checkChunk(t, s, id, body)
	if want := []bool{false}; !slices.Equal(*got, want) {
		t.Errorf("writes went direct: %v, want %v", *got, want)
	}
}

func sum(s []int) (n int) {
	for _, k := range s {
		n += k
	}
	return n
}

// data.Write's pieces are aligned: a body streams to its chunk files
// direct, all but its tail.
func TestWriteStreamsDirect(t *testing.T) {
	ctx := context.Background()
	s := openWith(t, t.TempDir(), Options{DirectIO: true})
	got := recordWrites(t, s)
	body := storetest.Random(1, 2<<20+5)
	w, err := data.Write(ctx, s, bytes.NewReader(body), data.WriteOptions{ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := data.NewReader(ctx, s, w.Manifest, 0, -1)
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("read back: %d bytes (%v), want the %d written", len(b), err, len(body))
	}
	skipBuffered(t, s)
	// Pieces of 256 KiB: 4 per chunk, then the 5 bytes of the tail.
	if want := append(slices.Repeat([]bool{true}, 8), false); !slices.Equal(*got, want) {
		t.Errorf("writes went direct: %v, want %v", *got, want)
	}
}

// A file system that refuses direct I/O is asked once: the store writes
// through the page cache from then on.
func TestNoDirectIO(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWith(t, dir, Options{DirectIO: true})
	asked := 0
	s.direct = func(f *os.File, on bool) error {
		if on {
			asked++
			return &fs.PathError{Op: "fcntl", Path: f.Name(), Err: syscall.EINVAL}
		}
		return setDirect(f, on)
	}
	got := recordWrites(t, s)
	for i := range 3 {
		body := alignedRandom(uint64(i), 16*align, 0)
		id := data.NewChunkID()
		if err := s.Put(ctx, id, body); err != nil {
			t.Fatal(err)
		}
		checkChunk(t, s, id, body)
	}
	if asked != 1 || !s.buffered.Load() {
		t.Errorf("direct I/O asked for %d times, store buffered: %v; want once, true", asked, s.buffered.Load())
	}
	if want := []bool{false, false, false}; !slices.Equal(*got, want) {
		t.Errorf("writes went direct: %v, want %v", *got, want)
	}
}

// Any other failure to turn direct I/O on fails the chunk, leaving nothing
// behind.
func TestDirectIOFails(t *testing.T) {
	dir := t.TempDir()
	s := openWith(t, dir, Options{DirectIO: true})
	s.direct = func(*os.File, bool) error { return syscall.EIO }
	id := data.NewChunkID()
	err := s.Put(context.Background(), id, []byte("chunk"))
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "put chunk "+id.String()) {
		t.Fatalf("Put: %v, want EIO", err)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) != 0 || count(t, s) != 0 || s.buffered.Load() {
		t.Fatalf("failed Put left %d temporary files, %d chunks; store buffered: %v", len(tmp), count(t, s), s.buffered.Load())
	}
}
