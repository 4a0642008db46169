package data_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

const testChunk = 64 << 10

func TestWriteRead(t *testing.T) {
	// Chunks smaller than a piece buffer, and larger by a piece and a bit.
	const small, large = testChunk, 1<<20 + 5000
	for _, k := range kinds {
		for _, r := range [][2]int{
			{small, 0}, {small, 1}, {small, 4095}, {small, 4096}, {small, 4097},
			{small, small - 1}, {small, small}, {small, small + 1}, {small, 3*small + 17},
			{large, large}, {large, 2*large + 300<<10},
		} {
			t.Run(fmt.Sprint(k.name, "/", r[0], "/", r[1]), func(t *testing.T) { testWriteRead(t, k.of, r[0], r[1]) })
		}
	}
}

// TestWriteDigests checks each digest of inline and chunked bodies.
func TestWriteDigests(t *testing.T) {
	for _, size := range []int{0, 100, data.DefaultInlineMax + 1, 3*testChunk + 17} {
		b := storetest.Random(uint64(size), size)
		m := md5.Sum(b)
		c := binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		for d, want := range map[data.Digest][]byte{data.MD5: m[:], data.CRC32C: c} {
			w, err := data.Write(context.Background(), newMem(), bytes.NewReader(b), data.WriteOptions{ChunkSize: testChunk, Digest: d})
			if err != nil || !bytes.Equal(w.Sum, want) {
				t.Errorf("%d bytes, digest %d: %v, sum %x; want %x", size, d, err, w.Sum, want)
			}
		}
	}
}

// testWriteRead writes size bytes in chunks of cs to a store of(a memStore)
// and reads them back.
func testWriteRead(t *testing.T, of func(*memStore) data.Store, cs, size int) {
	ctx := context.Background()
	s := newMem()
	b := storetest.Random(uint64(size), size)
	// Short reads, and data arriving with io.EOF, must not matter.
	body := iotest.DataErrReader(iotest.HalfReader(bytes.NewReader(b)))
	w, err := data.Write(ctx, of(s), body, data.WriteOptions{ChunkSize: cs})
	if err != nil {
		t.Fatal(err)
	}
	if w.Size != int64(size) || w.Manifest.Size != int64(size) {
		t.Fatalf("size %d, manifest size %d; want %d", w.Size, w.Manifest.Size, size)
	}
	if sum := md5.Sum(b); !bytes.Equal(w.Sum, sum[:]) {
		t.Fatalf("MD5 %x, want %x", w.Sum, sum)
	}
	chunks := 0
	if size > data.DefaultInlineMax {
		chunks = (size + cs - 1) / cs
	} else if !bytes.Equal(w.Manifest.Inline, b) {
		t.Fatalf("%d bytes not inline", size)
	}
	if len(w.Manifest.Chunks) != chunks || s.len() != chunks {
		t.Fatalf("%d chunks listed, %d stored; want %d", len(w.Manifest.Chunks), s.len(), chunks)
	}
	if !bytes.Equal(contents(t, s, w.Manifest), b) {
		t.Fatal("read back wrong bytes")
	}
	checkRanges(t, s, w.Manifest, b)
}

// checkRanges reads random ranges of m back both ways and compares them
// with b, m's expected bytes.
func checkRanges(t *testing.T, s data.Store, m *data.Manifest, b []byte) {
	t.Helper()
	ctx := context.Background()
	size := int64(len(b))
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	ra := data.NewReaderAt(s, m)
	for range 30 {
		off := rng.Int64N(size + 1)
		n := rng.Int64N(size - off + 1)
		r := data.NewReader(ctx, s, m, off, n)
		if err := iotest.TestReader(r, b[off:off+n]); err != nil {
			t.Fatalf("NewReader(%d, %d): %v", off, n, err)
		}
		r.Close()
		// ReadAt past the end returns what there is, with io.EOF.
		p := make([]byte, n+rng.Int64N(10))
		want := b[off:min(off+int64(len(p)), size)]
		var wantErr error
		if len(want) < len(p) {
			wantErr = io.EOF
		}
		k, err := ra.ReadAt(ctx, p, off)
		if k != len(want) || err != wantErr || !bytes.Equal(p[:k], want) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d, %v", len(p), off, k, err, len(want), wantErr)
		}
	}
	for _, r := range [][2]int64{{-1, 1}, {size + 1, -1}, {0, size + 1}, {size, 1}} {
		_, err := io.ReadAll(data.NewReader(ctx, s, m, r[0], r[1]))
		if !errors.Is(err, data.ErrRange) {
			t.Fatalf("NewReader(%d, %d): %v; want ErrRange", r[0], r[1], err)
		}
	}
}

// A failing Put fails the Write, which waits for the Puts in flight and
// leaves no chunk behind, wherever in the stream the failure happens.
func TestWritePutFails(t *testing.T) {
	b := storetest.Random(1, 6*testChunk+3)
	for _, k := range kinds {
		for n := 1; n <= 7; n++ {
			s := newMem()
			s.failPut, s.putDelay = n, time.Millisecond
			_, err := data.Write(context.Background(), k.of(s), bytes.NewReader(b), data.WriteOptions{ChunkSize: testChunk})
			if !errors.Is(err, errInjected) {
				t.Fatalf("%s: Put %d failing: Write returned %v", k.name, n, err)
			}
			if running := s.running.Load(); running != 0 {
				t.Fatalf("%s: Put %d failing: Write returned with %d Puts running", k.name, n, running)
			}
			leftBehind(t, s)
		}
	}
}

// leftBehind fails t if a failed Write left a chunk or an open chunk
// writer (a temporary file, on disk) in s.
func leftBehind(t *testing.T, s *memStore) {
	t.Helper()
	if s.len() != 0 || s.writers.Load() != 0 {
		t.Fatalf("failed Write left %d chunks, %d chunk writers behind", s.len(), s.writers.Load())
	}
}

// A chunk writer failing in the middle of a chunk (a full disk) fails the
// Write just as a failing Put does.
func TestWriteChunkWriteFails(t *testing.T) {
	const cs = 1<<20 + 5000 // 5 pieces a chunk
	b := storetest.Random(1, 3*cs)
	for n := 1; n <= 15; n++ {
		s := newMem()
		s.failWrite = n
		_, err := data.Write(context.Background(), streamMem{s}, bytes.NewReader(b), data.WriteOptions{ChunkSize: cs})
		if !errors.Is(err, errInjected) {
			t.Fatalf("Write %d failing: Write returned %v", n, err)
		}
		leftBehind(t, s)
	}
}

func TestWriteBodyFails(t *testing.T) {
	// A body cut short (net/http says io.ErrUnexpectedEOF) fails the write
	// like any other read error: it must not pass for the end of the body.
	for _, k := range kinds {
		for _, broken := range []error{errors.New("connection reset"), io.ErrUnexpectedEOF} {
			s := newMem()
			body := io.MultiReader(bytes.NewReader(storetest.Random(1, 3*testChunk+5)), iotest.ErrReader(broken))
			_, err := data.Write(context.Background(), k.of(s), body, data.WriteOptions{ChunkSize: testChunk})
			if !errors.Is(err, broken) {
				t.Fatalf("%s: Write: %v, want the body's error %v", k.name, err, broken)
			}
			leftBehind(t, s)
		}
	}
}

// cancelAfter cancels a context once n bytes have been read through it.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}

func TestWriteCanceled(t *testing.T) {
	for _, k := range kinds {
		s := newMem()
		ctx, cancel := context.WithCancel(context.Background())
		body := &cancelAfter{r: bytes.NewReader(storetest.Random(1, 10*testChunk)), n: 3*testChunk + 5, cancel: cancel}
		_, err := data.Write(ctx, k.of(s), body, data.WriteOptions{ChunkSize: testChunk})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Write: %v, want context.Canceled", k.name, err)
		}
		leftBehind(t, s)
	}
}

func TestWriteNeverInline(t *testing.T) {
	s := newMem()
	w, err := data.Write(context.Background(), s, bytes.NewReader([]byte("tiny")), data.WriteOptions{InlineMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Manifest.Inline) != 0 || len(w.Manifest.Chunks) != 1 {
		t.Fatalf("InlineMax -1: manifest %v, want one chunk", w.Manifest)
	}
	w, err = data.Write(context.Background(), s, bytes.NewReader(nil), data.WriteOptions{InlineMax: -1})
	if err != nil || w.Size != 0 || len(w.Manifest.Chunks) != 0 {
		t.Fatalf("empty body: %v, %v; want no chunk", w, err)
	}
}

// A Held body small enough is kept inline as it is, not copied; any other
// is written as any reader is, and a Held body is read once.
func TestWriteHeld(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{0, 1, data.DefaultInlineMax, data.DefaultInlineMax + 1, 3*testChunk + 17} {
		for _, never := range []bool{false, true} {
			s := newMem()
			b := storetest.Random(uint64(size), size)
			o := data.WriteOptions{ChunkSize: testChunk}
			if never {
				o.InlineMax = -1
			}
			h := data.NewHeld(b)
			w, err := data.Write(ctx, s, h, o)
			if err != nil {
				t.Fatal(err)
			}
			sum := md5.Sum(b)
			if w.Size != int64(size) || !bytes.Equal(w.Sum, sum[:]) || !bytes.Equal(contents(t, s, w.Manifest), b) {
				t.Fatalf("%d bytes, never inline %v: size %d, sum %x, or bytes wrong", size, never, w.Size, w.Sum)
			}
			inline := size > 0 && size <= data.DefaultInlineMax && !never
			if got := len(w.Manifest.Inline) > 0 && &w.Manifest.Inline[0] == &b[0]; got != inline {
				t.Fatalf("%d bytes, never inline %v: kept as they are %v, want %v", size, never, got, inline)
			}
			if n, err := h.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("%d bytes: Held read again: %d, %v; want EOF", size, n, err)
			}
		}
	}
	// One already read from is read as any reader.
	b := storetest.Random(7, 100)
	h := data.NewHeld(b)
	if _, err := h.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	w, err := data.Write(ctx, newMem(), h, data.WriteOptions{})
	if err != nil || !bytes.Equal(w.Manifest.Inline, b[10:]) || &w.Manifest.Inline[0] == &b[10] {
		t.Fatalf("Held read from: %v, inline %x; want a copy of the rest", err, w.Manifest.Inline)
	}
}

// Write streams: a body far larger than memory allowances passes through a
// few reused chunk buffers.
func TestWriteMemory(t *testing.T) {
	const (
		chunk = 1 << 20
		size  = 256 << 20
	)
	var (
		mu   sync.Mutex
		ms   runtime.MemStats
		peak uint64
		puts int
	)
	s := newMem()
	s.onPut = func([]byte) {
		mu.Lock()
		defer mu.Unlock()
		if puts++; puts%16 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	runtime.GC() // twice: pools keep buffers over one collection
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, allocated := ms.HeapAlloc, ms.TotalAlloc
	key := [32]byte{1}
	w, err := data.Write(context.Background(), s, io.LimitReader(rand.NewChaCha8(key), size), data.WriteOptions{ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	allocated = ms.TotalAlloc - allocated
	t.Logf("heap grew by at most %.1f MiB; %.1f MiB allocated in all", float64(max(peak, base)-base)/(1<<20), float64(allocated)/(1<<20))
	if peak > base+32<<20 {
		t.Errorf("heap grew by %d MiB writing %d MiB in %d MiB chunks", (peak-base)>>20, size>>20, chunk>>20)
	}
	if allocated > 64<<20 && !raceEnabled {
		t.Errorf("allocated %d MiB writing %d MiB: chunk buffers are not reused", allocated>>20, size>>20)
	}
	h := md5.New()
	_, _ = io.Copy(h, io.LimitReader(rand.NewChaCha8(key), size))
	if w.Size != size || !bytes.Equal(w.Sum, h.Sum(nil)) {
		t.Fatalf("wrote %d bytes with MD5 %x; want %d, %x", w.Size, w.Sum, size, h.Sum(nil))
	}
}
