package data_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// written stores size random bytes in testChunk chunks.
func written(t *testing.T, s data.Store, size int) (*data.Manifest, []byte) {
	t.Helper()
	b := storetest.Random(uint64(size), size)
	w, err := data.Write(context.Background(), s, bytes.NewReader(b), data.WriteOptions{ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	return w.Manifest, b
}

func TestReadMissingChunk(t *testing.T) {
	ctx := context.Background()
	s := newMem()
	m, _ := written(t, s, 3*testChunk)
	if err := s.Delete(ctx, data.ChunkID(m.Chunks[1].Id)); err != nil {
		t.Fatal(err)
	}
	r := data.NewReader(ctx, s, m, 0, -1)
	defer r.Close()
	got, err := io.ReadAll(r)
	if !errors.Is(err, data.ErrNoSuchChunk) || len(got) != testChunk {
		t.Fatalf("NewReader: %d bytes, %v; want %d bytes, ErrNoSuchChunk", len(got), err, testChunk)
	}
	if _, err := data.NewReaderAt(s, m).ReadAt(ctx, make([]byte, 10), testChunk+5); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("ReadAt: %v, want ErrNoSuchChunk", err)
	}
}

// A chunk shorter than its manifest says is corrupt, not the end of the
// object.
func TestReadShortChunk(t *testing.T) {
	ctx := context.Background()
	s := newMem()
	id := data.NewChunkID()
	if err := s.Put(ctx, id, []byte("only ten b")); err != nil {
		t.Fatal(err)
	}
	m := &data.Manifest{Size: 20, Chunks: []*data.Chunk{{Id: id[:], Length: 20}}}
	if _, err := io.ReadAll(data.NewReader(ctx, s, m, 0, -1)); !errors.Is(err, data.ErrCorrupt) {
		t.Fatalf("NewReader: %v, want ErrCorrupt", err)
	}
	if _, err := data.NewReaderAt(s, m).ReadAt(ctx, make([]byte, 20), 0); !errors.Is(err, data.ErrCorrupt) {
		t.Fatalf("ReadAt: %v, want ErrCorrupt", err)
	}
}

func TestReaderClose(t *testing.T) {
	s := newMem()
	m, b := written(t, s, 5*testChunk)
	r := data.NewReader(context.Background(), s, m, 0, -1)
	p := make([]byte, 100)
	if _, err := io.ReadFull(r, p); err != nil || !bytes.Equal(p, b[:100]) {
		t.Fatalf("first Read: %v", err)
	}
	// Close while the fetcher is blocked handing over the next piece.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(p); err == nil || err == io.EOF {
		t.Fatalf("Read after Close: %v, want an error", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Ending the context mid-stream is an error, never a silent early EOF.
func TestReaderCanceled(t *testing.T) {
	s := newMem()
	m, _ := written(t, s, 5*testChunk)
	ctx, cancel := context.WithCancel(context.Background())
	r := data.NewReader(ctx, s, m, 0, -1)
	defer r.Close()
	if _, err := r.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	cancel()
	n, err := io.Copy(io.Discard, r)
	if !errors.Is(err, context.Canceled) || n >= 5*testChunk-100 {
		t.Fatalf("after cancel: %d more bytes, %v; want context.Canceled", n, err)
	}
}

// WriteTo streams the same bytes as Read, and a missing chunk fails it
// after the bytes before it.
func TestReaderWriteTo(t *testing.T) {
	ctx := context.Background()
	s := newMem()
	m, b := written(t, s, 3*testChunk+5)
	for _, r := range [][2]int64{{0, -1}, {1, testChunk}, {testChunk - 1, 2*testChunk + 3}} {
		var w bytes.Buffer
		rd := data.NewReader(ctx, s, m, r[0], r[1])
		n, err := rd.WriteTo(&w)
		rd.Close()
		want := b[r[0]:]
		if r[1] >= 0 {
			want = want[:r[1]]
		}
		if err != nil || n != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("WriteTo %v: %d bytes, %v", r, n, err)
		}
	}
	if err := s.Delete(ctx, data.ChunkID(m.Chunks[1].Id)); err != nil {
		t.Fatal(err)
	}
	rd := data.NewReader(ctx, s, m, 0, -1)
	defer rd.Close()
	if n, err := rd.WriteTo(io.Discard); !errors.Is(err, data.ErrNoSuchChunk) || n != testChunk {
		t.Fatalf("WriteTo: %d bytes, %v; want %d bytes, ErrNoSuchChunk", n, err, testChunk)
	}
}
