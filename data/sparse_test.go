package data_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// holes returns how many hole ranges m has.
func holes(m *data.Manifest) int {
	n := 0
	for _, c := range m.Chunks {
		if c.Hole() {
			n++
		}
	}
	return n
}

// Growing an object, by a write past its end or with nothing written at
// all, stores no zeros: the gap is a hole that reads as zeros.
func TestOverwritePastTheEndMakesAHole(t *testing.T) {
	ctx := context.Background()
	const cs = 1 << 10
	o := data.WriteOptions{ChunkSize: cs}
	s := newMem()
	head := storetest.Random(1, 100)
	w, err := data.Write(ctx, s, bytes.NewReader(head), o)
	if err != nil {
		t.Fatal(err)
	}
	m := w.Manifest // inline: its gap is written, as it is small
	if m, err = data.Overwrite(ctx, s, m, cs, 1, bytes.NewReader([]byte{'x'}), o); err != nil {
		t.Fatal(err)
	}
	const far = 1000 * cs
	puts := s.puts.Load()
	if m, err = data.Overwrite(ctx, s, m, far, 3, bytes.NewReader([]byte("end")), o); err != nil {
		t.Fatal(err)
	}
	if m, err = data.Overwrite(ctx, s, m, 2*far, 0, nil, o); err != nil { // truncate -s
		t.Fatal(err)
	}
	if n := s.puts.Load() - puts; n != 1 {
		t.Errorf("growing by %d bytes with 3 written stored %d chunks, want 1", 2*far, n)
	}
	if holes(m) != 2 {
		t.Errorf("manifest %v: want 2 holes", m)
	}
	want := make([]byte, 2*far)
	copy(want, head)
	want[cs] = 'x'
	copy(want[far:], "end")
	if !bytes.Equal(contents(t, s, m), want) {
		t.Fatal("sparse object reads wrong bytes")
	}
	// A write into the middle of the hole rewrites one chunk of it.
	puts = s.puts.Load()
	if m, err = data.Overwrite(ctx, s, m, far+500*cs+7, 1, bytes.NewReader([]byte{'y'}), o); err != nil {
		t.Fatal(err)
	}
	if n := s.puts.Load() - puts; n != 1 {
		t.Errorf("1-byte write into a hole stored %d chunks, want 1", n)
	}
	want[far+500*cs+7] = 'y'
	if !bytes.Equal(contents(t, s, m), want) {
		t.Fatal("bytes written into a hole read wrong")
	}
	for _, id := range m.ChunkIDs() {
		if id == (data.ChunkID{}) {
			t.Fatal("ChunkIDs names a hole")
		}
	}
}

// Write stores a chunk of zeros as a hole, and ReaderAt reads it as zeros.
func TestWriteStoresZeroChunksAsHoles(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { testZeroChunks(t, k.of) })
	}
}

func testZeroChunks(t *testing.T, of func(*memStore) data.Store) {
	ctx := context.Background()
	const cs = 1 << 10
	body := make([]byte, 10*cs)
	copy(body[3*cs:], storetest.Random(2, cs))
	s := newMem()
	w, err := data.Write(ctx, of(s), bytes.NewReader(body), data.WriteOptions{ChunkSize: cs})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.len(); n != 1 {
		t.Errorf("stored %d chunks, want 1: the others are zeros", n)
	}
	if got := len(w.Manifest.Chunks); got != 3 {
		t.Errorf("manifest %v: want hole, chunk, hole", w.Manifest)
	}
	if !bytes.Equal(contents(t, s, w.Manifest), body) {
		t.Fatal("wrong bytes")
	}
	r := data.NewReaderAt(s, w.Manifest)
	if _, _, ok := r.Span(cs, 10); ok {
		t.Error("Span of bytes in a hole names a chunk")
	}
	if id, at, ok := r.Span(3*cs+5, 10); !ok || at != 5 || id != data.ChunkID(w.Manifest.Chunks[1].Id) {
		t.Errorf("Span in the chunk: %v %d %v", id, at, ok)
	}
	if _, _, ok := r.Span(4*cs-5, 10); ok {
		t.Error("Span across a chunk's end names one chunk")
	}
}

// A chunk that is not all zeros is stored whole, its leading zeros too,
// when they fill pieces of their own before its first other byte.
func TestWriteLeadingZeros(t *testing.T) {
	const cs = 1<<20 + 5000
	for _, k := range kinds {
		body := make([]byte, 2*cs)
		copy(body[cs+600<<10:], storetest.Random(3, 1000)) // in the chunk's third piece
		body[2*cs-1] = 1
		s := newMem()
		w, err := data.Write(context.Background(), k.of(s), bytes.NewReader(body), data.WriteOptions{ChunkSize: cs})
		if err != nil {
			t.Fatal(err)
		}
		if s.len() != 1 || len(w.Manifest.Chunks) != 2 || !w.Manifest.Chunks[0].Hole() {
			t.Errorf("%s: %d chunks stored, manifest %v; want a hole, then one chunk", k.name, s.len(), w.Manifest)
		}
		if !bytes.Equal(contents(t, s, w.Manifest), body) {
			t.Fatalf("%s: wrong bytes", k.name)
		}
	}
}
