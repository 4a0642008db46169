package local

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// The benchmarks set a 64 MiB object through the store beside a plain file
// of the same bytes on the same disk, in the same run, so that the ratio
// between them means something on any machine.

const benchSize = 64 << 20

// BenchmarkWrite: data.Write (chunking, MD5, fsync and rename per chunk)
// against one file written and fsynced.
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	body := storetest.Random(1, benchSize)
	b.Run("store", func(b *testing.B) {
		s := open(b, b.TempDir())
		b.SetBytes(benchSize)
		for range b.N {
			w, err := data.Write(ctx, s, bytes.NewReader(body), data.WriteOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			for _, id := range w.Manifest.ChunkIDs() {
				if err := s.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	})
	b.Run("file", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "file")
		b.SetBytes(benchSize)
		for range b.N {
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(body); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.Remove(p); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkRead: data.NewReader against reading the file, both through the
// same 1 MiB buffer (a server's copy loop) and both from the page cache.
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	body := storetest.Random(1, benchSize)
	buf := make([]byte, 1<<20)
	// drain copies r to nowhere through buf, bypassing io.Copy's shortcuts
	// so that both sides do the same work.
	drain := func(b *testing.B, r io.Reader) {
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, buf)
		if err != nil || n != benchSize {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
	b.Run("store", func(b *testing.B) {
		s := open(b, b.TempDir())
		w, err := data.Write(ctx, s, bytes.NewReader(body), data.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSize)
		b.ResetTimer()
		for range b.N {
			r := data.NewReader(ctx, s, w.Manifest, 0, -1)
			drain(b, r)
			r.Close()
		}
	})
	b.Run("file", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "file")
		if err := os.WriteFile(p, body, 0o600); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSize)
		b.ResetTimer()
		for range b.N {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			drain(b, f)
			f.Close()
		}
	})
}
