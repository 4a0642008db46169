// Package storetest checks that a data.Store keeps the contract of the
// interface: the same cases for every chunk store, so that the core can
// rely on any of them alike.
package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
)

// Run runs the contract cases against stores made by open, a fresh empty
// store per case; open registers any cleanup with t.
func Run(t *testing.T, open func(t *testing.T) data.Store) {
	cases := []struct {
		name string
		fn   func(*testing.T, data.Store)
	}{
		{"ReadAt", testReadAt},
		{"PutKeepsNoBuffer", testPutKeepsNoBuffer},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"Walk", testWalk},
		{"Concurrent", testConcurrent},
		{"Stream", testStream},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// Random returns n pseudo-random bytes, the same for the same seed: test
// content that no compression or pattern can flatter.
func Random(seed uint64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func put(t *testing.T, s data.Store, b []byte) data.ChunkID {
	t.Helper()
	id := data.NewChunkID()
	if err := s.Put(context.Background(), id, b); err != nil {
		t.Fatalf("Put: %v", err)
	}
	return id
}

func testReadAt(t *testing.T, s data.Store) {
	ctx := context.Background()
	want := Random(1, 10000)
	id := put(t, s, want)
	for _, r := range []struct{ off, n int }{{0, 10000}, {0, 1}, {9999, 1}, {1234, 5678}, {10000, 0}} {
		p := make([]byte, r.n)
		n, err := s.ReadAt(ctx, id, p, int64(r.off))
		if err != nil && err != io.EOF || n != r.n {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", r.n, r.off, n, err)
		}
		if !bytes.Equal(p, want[r.off:r.off+r.n]) {
			t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", r.n, r.off)
		}
	}
	// Past the end: fewer bytes, and an error to say so (io.ReaderAt).
	p := make([]byte, 100)
	n, err := s.ReadAt(ctx, id, p, 9950)
	if n != 50 || err == nil || !bytes.Equal(p[:n], want[9950:]) {
		t.Fatalf("ReadAt across the end = %d, %v; want 50 bytes and an error", n, err)
	}
}

func testPutKeepsNoBuffer(t *testing.T, s data.Store) {
	b := Random(2, 4096)
	want := bytes.Clone(b)
	id := put(t, s, b)
	clear(b)
	p := make([]byte, len(want))
	if _, err := s.ReadAt(context.Background(), id, p, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(p, want) {
		t.Fatal("chunk changed when the caller reused its buffer after Put")
	}
}

func testMissing(t *testing.T, s data.Store) {
	ctx := context.Background()
	id := data.NewChunkID()
	if _, err := s.ReadAt(ctx, id, make([]byte, 1), 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("ReadAt of a missing chunk: %v; want ErrNoSuchChunk", err)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete of a missing chunk: %v", err)
	}
}

func testDelete(t *testing.T, s data.Store) {
	ctx := context.Background()
	id := put(t, s, []byte("doomed"))
	keep := put(t, s, []byte("kept"))
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(ctx, id, make([]byte, 1), 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("ReadAt after Delete: %v; want ErrNoSuchChunk", err)
	}
	if _, err := s.ReadAt(ctx, keep, make([]byte, 4), 0); err != nil && err != io.EOF {
		t.Fatalf("ReadAt of another chunk after Delete: %v", err)
	}
}

func testWalk(t *testing.T, s data.Store) {
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	want := map[data.ChunkID]int64{}
	for i := range 20 {
		want[put(t, s, Random(uint64(i), 100*i+1))] = int64(100*i + 1)
	}
	got := map[data.ChunkID]int64{}
	err := s.Walk(ctx, func(id data.ChunkID, size int64, mod time.Time) error {
		if mod.Before(start) || mod.After(time.Now().Add(time.Minute)) {
			t.Errorf("chunk %s: modified %v, written just now", id, mod)
		}
		got[id] = size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Walk saw %v, want %v", got, want)
	}
	stop := errors.New("stop")
	calls := 0
	err = s.Walk(ctx, func(data.ChunkID, int64, time.Time) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Walk whose fn fails: %v after %d calls; want fn's error after 1", err, calls)
	}
}

func testConcurrent(t *testing.T, s data.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				b := Random(uint64(g*10+i), 1000+i)
				id := data.NewChunkID()
				if err := s.Put(ctx, id, b); err != nil {
					t.Error(err)
					return
				}
				p := make([]byte, len(b))
				if _, err := s.ReadAt(ctx, id, p, 0); err != nil && err != io.EOF || !bytes.Equal(p, b) {
					t.Errorf("chunk %s read back wrong: %v", id, err)
				}
				if err := s.Delete(ctx, id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// testStream checks a StreamStore's chunk writers: a chunk exists once
// committed, with the bytes of every Write, and not after an Abort or a
// Commit that failed.
func testStream(t *testing.T, s data.Store) {
	ss, ok := s.(data.StreamStore)
	if !ok {
		t.Skip("not a StreamStore")
	}
	ctx := context.Background()
	create := func() (data.ChunkID, data.ChunkWriter) {
		t.Helper()
		id := data.NewChunkID()
		w, err := ss.CreateChunk(id)
		if err != nil {
			t.Fatalf("CreateChunk: %v", err)
		}
		return id, w
	}
	want := Random(3, 100000)
	id, w := create()
	for b := want; len(b) > 0; b = b[min(len(b), 30000):] {
		piece := bytes.Clone(b[:min(len(b), 30000)])
		if _, err := w.Write(piece); err != nil {
			t.Fatalf("Write: %v", err)
		}
		clear(piece) // the writer must not keep it
	}
	if _, err := s.ReadAt(ctx, id, make([]byte, 1), 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("ReadAt before Commit: %v; want ErrNoSuchChunk", err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	w.Abort() // does nothing after Commit
	p := make([]byte, len(want))
	if _, err := s.ReadAt(ctx, id, p, 0); err != nil && err != io.EOF || !bytes.Equal(p, want) {
		t.Fatalf("committed chunk reads back wrong: %v", err)
	}

	aborted, w := create()
	if _, err := w.Write(want); err != nil {
		t.Fatalf("Write: %v", err)
	}
	w.Abort()
	canceled, w := create()
	if _, err := w.Write(want); err != nil {
		t.Fatalf("Write: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Commit(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with its context ended: %v; want context.Canceled", err)
	}
	for _, id := range []data.ChunkID{aborted, canceled} {
		if _, err := s.ReadAt(ctx, id, make([]byte, 1), 0); !errors.Is(err, data.ErrNoSuchChunk) {
			t.Fatalf("ReadAt of a chunk aborted or not committed: %v; want ErrNoSuchChunk", err)
		}
	}
}
