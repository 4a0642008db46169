package data_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

func id(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }

// validManifests are seeds for the codec tests and the fuzzer.
var validManifests = []*data.Manifest{
	{},
	{Size: 3, Inline: []byte("abc")},
	{Size: 30, Chunks: []*data.Chunk{{Id: id(1), Length: 10}, {Id: id(2), Offset: 5, Length: 20}}},
	{Size: 30, Chunks: []*data.Chunk{{Id: id(1), Length: 30}}, Parts: []int64{10, 0, 20}},
	{Size: 3, Inline: []byte("abc"), Parts: []int64{3}},
	{Size: 40, Chunks: []*data.Chunk{{Id: id(1), Length: 10}, {Length: 25}, {Id: id(2), Length: 5}}}, // a hole
}

func TestManifestCodec(t *testing.T) {
	for _, m := range validManifests {
		b, err := data.EncodeManifest(m)
		if err != nil {
			t.Fatalf("EncodeManifest(%v): %v", m, err)
		}
		got, err := data.DecodeManifest(b)
		if err != nil || !proto.Equal(got, m) {
			t.Fatalf("DecodeManifest(EncodeManifest(%v)) = %v, %v", m, got, err)
		}
	}
	chunk := func(b []byte, off, n int64) []*data.Chunk { return []*data.Chunk{{Id: b, Offset: off, Length: n}} }
	for _, m := range []*data.Manifest{
		{Size: -1},
		{Size: 1},
		{Size: 2, Inline: []byte("a")},
		{Size: 11, Inline: []byte("a"), Chunks: chunk(id(1), 0, 10)},
		{Size: 10, Chunks: chunk(id(1)[:15], 0, 10)},
		{Size: 10, Chunks: chunk(nil, 5, 10)}, // a hole has no offset
		{Size: 10, Chunks: chunk(nil, 0, 0)},
		{Size: 10, Chunks: chunk(id(1), -1, 10)},
		{Size: 0, Chunks: chunk(id(1), 0, 0)},
		{Size: 10, Chunks: chunk(id(1), 0, 11)},
		{Size: 10, Chunks: chunk(id(1), 0, 9)},
		{Size: 10, Chunks: chunk(id(1), math.MaxInt64-5, 10)},
		{Size: math.MaxInt64, Chunks: append(chunk(id(1), 0, math.MaxInt64), chunk(id(2), 0, math.MaxInt64)...)},
		{Size: 10, Chunks: chunk(id(1), 0, 10), Parts: []int64{5}},
		{Size: 10, Chunks: chunk(id(1), 0, 10), Parts: []int64{15, -5}},
	} {
		if _, err := data.EncodeManifest(m); !errors.Is(err, data.ErrCorrupt) {
			t.Errorf("EncodeManifest(%v): %v, want ErrCorrupt", m, err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := data.DecodeManifest(b); !errors.Is(err, data.ErrCorrupt) {
			t.Errorf("DecodeManifest(%v): %v, want ErrCorrupt", m, err)
		}
	}
	if _, err := data.DecodeManifest([]byte{0xff, 0xff}); !errors.Is(err, data.ErrCorrupt) {
		t.Errorf("DecodeManifest of junk: %v, want ErrCorrupt", err)
	}
}

// zeroStore reads every chunk, of any length, as zeros: enough for any
// manifest's arithmetic to run. It only reads.
type zeroStore struct{ data.Store }

func (zeroStore) ReadAt(_ context.Context, _ data.ChunkID, p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}

func FuzzDecodeManifest(f *testing.F) {
	for _, m := range validManifests {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := data.DecodeManifest(b)
		if err != nil {
			if !errors.Is(err, data.ErrCorrupt) {
				t.Fatalf("error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		// A reader holds chunks on Chunked's word: it must never miss one.
		if len(m.Chunks) > 0 && !data.Chunked(b) {
			t.Fatalf("Chunked = false for a manifest of %d chunk ranges", len(m.Chunks))
		}
		enc, err := data.EncodeManifest(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		again, err := data.DecodeManifest(enc)
		if err != nil || !proto.Equal(again, m) {
			t.Fatalf("round trip: %v, %v; want %v", again, err, m)
		}
		// Whatever a valid manifest holds, using it must not panic.
		off, n := m.Size/3, m.Size/3
		_ = m.Slice(off, n).ChunkIDs()
		m.Widen(off, n, data.DefaultChunkSize)
		p := make([]byte, min(n, 100))
		if k, err := data.NewReaderAt(zeroStore{}, m).ReadAt(context.Background(), p, off); k != len(p) || err != nil {
			t.Fatalf("ReadAt(%d bytes at %d of %d) = %d, %v", len(p), off, m.Size, k, err)
		}
	})
}

// manifestFor stores b as a manifest of either form (inline only when
// small), so the property tests below meet both.
func manifestFor(t *testing.T, s data.Store, rng *rand.Rand, b []byte) *data.Manifest {
	if len(b) > 0 && len(b) <= data.DefaultInlineMax && rng.IntN(3) == 0 {
		return &data.Manifest{Size: int64(len(b)), Inline: bytes.Clone(b)}
	}
	return chunked(t, s, rng, b)
}

// Slice, Splice and Concat against a plain []byte model.
func TestManifestModel(t *testing.T) {
	s := newMem()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		model := storetest.Random(uint64(i), rng.IntN(5000))
		m := manifestFor(t, s, rng, model)
		size := int64(len(model))
		off := rng.Int64N(size + 1)
		n := rng.Int64N(size - off + 1)

		if got := contents(t, s, m.Slice(off, n)); !bytes.Equal(got, model[off:off+n]) {
			t.Fatalf("Slice(%d, %d) of %d bytes: wrong bytes", off, n, size)
		}

		repl := storetest.Random(uint64(i)+1e6, rng.IntN(5000))
		rm := manifestFor(t, s, rng, repl)
		sp, err := m.Splice(off, n, rm)
		inline := len(m.Inline) > 0 && n < size || len(rm.Inline) > 0
		chunks := len(m.Chunks) > 0 && n < size || len(rm.Chunks) > 0
		if inline && chunks {
			if err == nil {
				t.Fatalf("Splice(%d, %d) mixing inline bytes with chunks succeeded", off, n)
			}
		} else if err != nil {
			t.Fatalf("Splice(%d, %d) of %d bytes: %v", off, n, size, err)
		} else if want := slices.Concat(model[:off], repl, model[off+n:]); !bytes.Equal(contents(t, s, sp), want) {
			t.Fatalf("Splice(%d, %d) of %d bytes: wrong bytes", off, n, size)
		}

		// Splitting and rejoining gives the original list, unfragmented.
		same, err := m.Splice(off, 0, &data.Manifest{})
		if err != nil || !proto.Equal(same, m) {
			t.Fatalf("empty Splice at %d changed the manifest: %v, %v", off, same, err)
		}

		var parts []*data.Manifest
		var want []byte
		for j := range rng.IntN(5) {
			b := storetest.Random(uint64(i*10+j), rng.IntN(3000))
			parts = append(parts, chunked(t, s, rng, b))
			want = append(want, b...)
		}
		c, err := data.Concat(parts...)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(contents(t, s, c), want) || len(c.Parts) != len(parts) {
			t.Fatalf("Concat of %d parts: wrong bytes or parts %v", len(parts), c.Parts)
		}
	}
}

func TestConcatInline(t *testing.T) {
	a := &data.Manifest{Size: 2, Inline: []byte("ab")}
	b := &data.Manifest{Size: 1, Inline: []byte("c")}
	c, err := data.Concat(a, b)
	if err != nil || string(c.Inline) != "abc" || !slices.Equal(c.Parts, []int64{2, 1}) {
		t.Fatalf("Concat of inline parts = %v, %v", c, err)
	}
	chunk := &data.Manifest{Size: 5, Chunks: []*data.Chunk{{Id: id(1), Length: 5}}}
	if _, err := data.Concat(chunk, b); err == nil {
		t.Fatal("Concat of a chunked and an inline part succeeded")
	}
}

func TestWiden(t *testing.T) {
	ranges := func(lengths ...int64) *data.Manifest {
		m := new(data.Manifest)
		for i, n := range lengths {
			m.Chunks = append(m.Chunks, &data.Chunk{Id: id(byte(i)), Length: n})
			m.Size += n
		}
		return m
	}
	full, short := ranges(10, 10, 10), ranges(10, 10, 5)
	inline := &data.Manifest{Size: 5, Inline: []byte("hello")}
	for _, c := range []struct {
		m              *data.Manifest
		off, n, wo, wn int64
	}{
		{full, 15, 1, 10, 10},  // inside one range: that range
		{full, 9, 2, 0, 20},    // across a boundary: both ranges
		{full, 10, 10, 10, 10}, // exactly one range
		{full, 10, 0, 10, 0},   // nothing
		{full, 25, 10, 20, 15}, // overlapping the end
		{full, 30, 5, 30, 5},   // appending after a full range
		{full, 35, 5, 30, 10},  // a gap to fill
		{short, 25, 5, 20, 10}, // appending after a short range refills it
		{short, 22, 1, 20, 5},
		{short, 10, 1, 10, 10},
		{inline, 2, 1, 0, 5}, // inline bytes are rewritten whole
		{inline, 7, 1, 0, 8},
		{&data.Manifest{}, 3, 2, 0, 5},
	} {
		if wo, wn := c.m.Widen(c.off, c.n, 10); wo != c.wo || wn != c.wn {
			t.Errorf("Widen(%d, %d) of %v = %d, %d; want %d, %d", c.off, c.n, c.m, wo, wn, c.wo, c.wn)
		}
	}
}

// Overwrite against a model, from each form of manifest; the manifest must
// stay in whole chunks, as Write made it, however it is edited.
func TestOverwrite(t *testing.T) {
	ctx := context.Background()
	const cs = 1 << 10
	o := data.WriteOptions{ChunkSize: cs}
	for _, start := range []int{0, 100, 5*cs + 7} {
		s := newMem()
		rng := rand.New(rand.NewPCG(uint64(start), 3))
		model := storetest.Random(uint64(start), start)
		w, err := data.Write(ctx, s, bytes.NewReader(model), o)
		if err != nil {
			t.Fatal(err)
		}
		m := w.Manifest
		sparse := false // a write past the end made a hole
		for i := range 100 {
			off := rng.Int64N(int64(len(model)) + 2*cs)
			sparse = sparse || off > int64(len(model))
			b := storetest.Random(uint64(i), rng.IntN(3*cs))
			if m, err = data.Overwrite(ctx, s, m, off, int64(len(b)), bytes.NewReader(b), o); err != nil {
				t.Fatal(err)
			}
			if len(b) > 0 || off > int64(len(model)) {
				model = append(model, make([]byte, max(0, int(off)+len(b)-len(model)))...)
			}
			copy(model[off:], b)
			if !bytes.Equal(contents(t, s, m), model) {
				t.Fatalf("Overwrite(%d, %d): wrong bytes", off, len(b))
			}
			want := (len(model) + cs - 1) / cs
			if sparse {
				// Gaps became holes, and chunks written into a hole
				// are cut from its start: a few more ranges, never two
				// holes in a row.
				for j := 1; j < len(m.Chunks); j++ {
					if m.Chunks[j].Hole() && m.Chunks[j-1].Hole() {
						t.Fatalf("Overwrite(%d, %d): holes %d and %d not merged", off, len(b), j-1, j)
					}
				}
				if len(m.Chunks) > 3*want {
					t.Fatalf("Overwrite(%d, %d): %d chunk ranges for %d bytes", off, len(b), len(m.Chunks), len(model))
				}
				continue
			}
			if len(m.Chunks) > 0 && len(m.Chunks) != want {
				t.Fatalf("Overwrite(%d, %d): %d chunk ranges for %d bytes, want %d", off, len(b), len(m.Chunks), len(model), want)
			}
			for j, c := range m.Chunks[:max(len(m.Chunks)-1, 0)] {
				if c.Length != cs {
					t.Fatalf("Overwrite(%d, %d): chunk range %d of %d bytes", off, len(b), j, c.Length)
				}
			}
		}
	}
}

// The design's promise: a 1-byte edit of a large file writes one chunk,
// and so does each small append.
func TestOverwriteWritesOneChunk(t *testing.T) {
	ctx := context.Background()
	const cs = 1 << 10
	o := data.WriteOptions{ChunkSize: cs}
	s := newMem()
	w, err := data.Write(ctx, s, bytes.NewReader(storetest.Random(1, 64*cs)), o)
	if err != nil {
		t.Fatal(err)
	}
	m := w.Manifest
	for _, off := range []int64{0, 1, 31*cs + 17, 64*cs - 1, 64 * cs, 64*cs + 1, 64*cs + 2} {
		puts := s.puts.Load()
		if m, err = data.Overwrite(ctx, s, m, off, 1, bytes.NewReader([]byte{'x'}), o); err != nil {
			t.Fatal(err)
		}
		if n := s.puts.Load() - puts; n != 1 {
			t.Errorf("1-byte Overwrite at %d wrote %d chunks", off, n)
		}
	}
}

func TestOverwriteShortBody(t *testing.T) {
	ctx := context.Background()
	s := newMem()
	w, err := data.Write(ctx, s, bytes.NewReader(storetest.Random(1, 5000)), data.WriteOptions{ChunkSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	stored := s.len()
	_, err = data.Overwrite(ctx, s, w.Manifest, 100, 10, bytes.NewReader([]byte("short")), data.WriteOptions{ChunkSize: 1000})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Overwrite with a short body: %v, want io.ErrUnexpectedEOF", err)
	}
	if s.len() != stored {
		t.Fatalf("failed Overwrite left %d chunks behind", s.len()-stored)
	}
}

// TestChunked: Chunked tells manifests with chunk ranges (holes count)
// from those without, as decoding them does, and takes what it cannot
// walk for chunked.
func TestChunked(t *testing.T) {
	if n := (&data.Manifest{}).ProtoReflect().Descriptor().Fields().ByName("chunks").Number(); n != 2 {
		t.Fatalf("Manifest.chunks is field %d; data.Chunked looks for 2", n)
	}
	for _, m := range append(slices.Clone(validManifests), &data.Manifest{Size: 4096, Inline: bytes.Repeat([]byte("x"), 4096)}) {
		b, err := data.EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := data.Chunked(b), len(m.Chunks) > 0; got != want {
			t.Errorf("Chunked(%v) = %v, want %v", m, got, want)
		}
	}
	b, err := data.EncodeManifest(&data.Manifest{Size: 3, Inline: []byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	if !data.Chunked(b[:len(b)-1]) {
		t.Error("Chunked of a truncated encoding: false, want true (the decoder reports it)")
	}
}
