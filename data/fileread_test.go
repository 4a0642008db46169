package data_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/data/storetest"
)

// fileObject stores, in a local store, an object of three ranges: part of
// a chunk (not from its start), a hole and a whole chunk. It returns the
// store, the manifest and the object's bytes.
func fileObject(t *testing.T) (*local.Store, *data.Manifest, []byte) {
	t.Helper()
	ctx := context.Background()
	s, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := storetest.Random(1, 1000), storetest.Random(2, 700)
	ida, idb := data.NewChunkID(), data.NewChunkID()
	if err := s.Put(ctx, ida, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, idb, b); err != nil {
		t.Fatal(err)
	}
	m := &data.Manifest{Size: 500 + 300 + 700, Chunks: []*data.Chunk{
		{Id: ida[:], Offset: 100, Length: 500},
		{Length: 300},
		{Id: idb[:], Length: 700},
	}}
	want := append(append(bytes.Clone(a[100:600]), make([]byte, 300)...), b...)
	return s, m, want
}

// filesSeen is a writer that records how many of the readers given to its
// ReadFrom were limited readers of files: what net/http sends with
// sendfile.
type filesSeen struct {
	bytes.Buffer
	files int
}

func (w *filesSeen) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			w.files++
		}
	}
	return w.Buffer.ReadFrom(r)
}

// Every range of an object of local chunks reads back exactly, by Read
// and by WriteTo, and WriteTo hands the writer the chunk files.
func TestFileReaderRanges(t *testing.T) {
	ctx := context.Background()
	s, m, want := fileObject(t)
	size := int64(len(want))
	edges := []int64{0, 1, 499, 500, 501, 799, 800, 801, size - 1, size}
	for _, off := range edges {
		for _, end := range edges {
			if end < off {
				continue
			}
			r := data.NewReader(ctx, s, m, off, end-off)
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, want[off:end]) {
				t.Fatalf("Read [%d, %d): %d bytes, %v", off, end, len(got), err)
			}
			var w filesSeen
			r = data.NewReader(ctx, s, m, off, end-off)
			n, err := r.WriteTo(&w)
			r.Close()
			if err != nil || n != end-off || !bytes.Equal(w.Bytes(), want[off:end]) {
				t.Fatalf("WriteTo [%d, %d): %d bytes, %v", off, end, n, err)
			}
			files := 0
			if off < 500 && end > off {
				files++
			}
			if end > 800 && end > off {
				files++
			}
			if w.files != files {
				t.Fatalf("WriteTo [%d, %d) gave %d files to ReadFrom, want %d", off, end, w.files, files)
			}
		}
	}
}

// A chunk removed before it is reached, or shorter than the manifest says,
// fails the stream after the bytes before it: never a clean short end.
func TestFileReaderBrokenChunk(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		damage func(s *local.Store, id data.ChunkID) error
		want   error
	}{
		{"deleted", func(s *local.Store, id data.ChunkID) error { return s.Delete(ctx, id) }, data.ErrNoSuchChunk},
		{"truncated", func(s *local.Store, id data.ChunkID) error {
			f, err := s.OpenChunk(id)
			if err != nil {
				return err
			}
			f.Close()
			return os.Truncate(f.Name(), 699)
		}, data.ErrCorrupt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, m, want := fileObject(t)
			if err := tt.damage(s, data.ChunkID(m.Chunks[2].Id)); err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			r := data.NewReader(ctx, s, m, 0, -1)
			defer r.Close()
			n, err := r.WriteTo(&w)
			if !errors.Is(err, tt.want) || n != int64(w.Len()) || !bytes.Equal(w.Bytes(), want[:n]) || n >= int64(len(want)) {
				t.Fatalf("WriteTo: %d bytes, %v; want a prefix and %v", n, err, tt.want)
			}
			r2 := data.NewReader(ctx, s, m, 0, -1)
			defer r2.Close()
			got, err := io.ReadAll(r2)
			if !errors.Is(err, tt.want) || !bytes.Equal(got, want[:len(got)]) || len(got) >= len(want) {
				t.Fatalf("Read: %d bytes, %v; want a prefix and %v", len(got), err, tt.want)
			}
		})
	}
}

// A stream read after Close fails, and WriteTo stops at a canceled context.
func TestFileReaderClosedAndCanceled(t *testing.T) {
	s, m, _ := fileObject(t)
	r := data.NewReader(context.Background(), s, m, 0, -1)
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := r.Read(make([]byte, 10)); err == nil || err == io.EOF {
		t.Fatalf("Read after Close: %v, want an error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r = data.NewReader(ctx, s, m, 0, -1)
	defer r.Close()
	cancel()
	if n, err := r.WriteTo(io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteTo after cancel: %d bytes, %v; want context.Canceled", n, err)
	}
}
