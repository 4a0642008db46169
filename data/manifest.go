package data

// manifest.pb.go is generated from manifest.proto; from the repository root:
//
//	protoc --go_out=. --go_opt=paths=source_relative data/manifest.proto

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// errMixed means an operation would put inline bytes and chunks in one
// manifest, which cannot say where the inline bytes sit among the chunks.
var errMixed = errors.New("cannot join inline bytes with chunks")

// EncodeManifest validates m and encodes it for a version row. Validating
// here too keeps a broken manifest from ever being committed.
func EncodeManifest(m *Manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	return b, nil
}

// DecodeManifest decodes a manifest read from a version row and checks the
// invariants every reader relies on, so that a damaged row fails here with
// ErrCorrupt rather than as wrong bytes or a panic later.
func DecodeManifest(b []byte) (*Manifest, error) {
	m := new(Manifest)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("decoding manifest: %w: %w", ErrCorrupt, err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// chunksField is the number of Manifest.chunks in manifest.proto
// (TestChunked checks it against the generated descriptor).
const chunksField protowire.Number = 2

// Chunked reports whether the encoded manifest b has any chunk range: a
// reader of it must hold those chunks against the collector, and one of a
// manifest without (a small object's inline bytes) holds nothing. It walks
// the fields' tags only, neither decoding nor copying the inline bytes.
// An encoding it cannot walk counts as chunked, so that the caller decodes
// it and DecodeManifest reports it.
func Chunked(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num == chunksField {
			return true
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return true
		}
		b = b[n:]
	}
	return false
}

// validate checks that m's pieces add up: every range arithmetic in this
// package assumes it, and subtractions below keep it free of overflow.
func (m *Manifest) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("manifest: %s: %w", fmt.Sprintf(format, a...), ErrCorrupt)
	}
	size := m.GetSize()
	if size < 0 {
		return bad("size %d", size)
	}
	if len(m.GetInline()) > 0 && len(m.GetChunks()) > 0 {
		return bad("%v", errMixed)
	}
	left := size - int64(len(m.GetInline()))
	for i, c := range m.GetChunks() {
		off, n := c.GetOffset(), c.GetLength()
		switch {
		case c.Hole() && off != 0:
			return bad("hole %d at offset %d", i, off)
		case !c.Hole() && len(c.GetId()) != len(ChunkID{}):
			return bad("chunk %d: id of %d bytes", i, len(c.GetId()))
		case off < 0 || n <= 0 || off > math.MaxInt64-n:
			return bad("chunk %d: range %d+%d", i, off, n)
		case n > left:
			return bad("chunks exceed size %d", size)
		}
		left -= n
	}
	if left != 0 {
		return bad("content of %d bytes, size %d", size-left, size)
	}
	if len(m.GetParts()) == 0 {
		return nil
	}
	left = size
	for i, n := range m.GetParts() {
		if n < 0 || n > left {
			return bad("part %d: size %d, %d bytes left", i+1, n, left)
		}
		left -= n
	}
	if left != 0 {
		return bad("parts sum to %d, size %d", size-left, size)
	}
	return nil
}

// Hole reports whether the range is a hole: zeros stored nowhere.
func (c *Chunk) Hole() bool { return len(c.GetId()) == 0 }

// hole returns a manifest of n zero bytes that references no chunk.
func hole(n int64) *Manifest {
	if n == 0 {
		return new(Manifest)
	}
	return &Manifest{Size: n, Chunks: []*Chunk{{Length: n}}}
}

// ChunkIDs returns the chunks m references, each once, in order: what the
// collector keeps alive and what a failed write deletes. Holes reference
// none.
func (m *Manifest) ChunkIDs() []ChunkID {
	var ids []ChunkID
	seen := make(map[ChunkID]bool, len(m.GetChunks()))
	for _, c := range m.GetChunks() {
		if c.Hole() {
			continue
		}
		id := ChunkID(c.GetId())
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// Slice returns a manifest of the bytes [off, off+n) of m that shares m's
// chunks, so ranged copies (UploadPartCopy) and truncations copy no bytes.
// The result is not multipart. Like slicing, Slice panics when the range
// is not within m: callers check ranges against Size, as they must anyway
// to answer a range error.
func (m *Manifest) Slice(off, n int64) *Manifest {
	if off < 0 || n < 0 || off > m.Size-n {
		panic(fmt.Sprintf("data: Slice(%d, %d) of %d bytes", off, n, m.Size))
	}
	s := &Manifest{Size: n}
	if len(m.Inline) > 0 {
		s.Inline = append([]byte(nil), m.Inline[off:off+n]...)
		return s
	}
	end := off + n
	var pos int64
	for _, c := range m.Chunks {
		if pos >= end {
			break
		}
		next := pos + c.Length
		if lo, hi := max(off, pos), min(end, next); lo < hi {
			r := &Chunk{Id: c.Id, Length: hi - lo}
			if !c.Hole() {
				r.Offset = c.Offset + lo - pos
			}
			s.Chunks = append(s.Chunks, r)
		}
		pos = next
	}
	return s
}

// Concat joins the manifests of a multipart upload's parts into the
// object's manifest, recording each part's size; no bytes are copied.
// Inline parts cannot join chunked ones: write parts with a negative
// InlineMax.
func Concat(parts ...*Manifest) (*Manifest, error) {
	m, err := join(parts...)
	if err != nil {
		return nil, fmt.Errorf("concat: %w", err)
	}
	m.Parts = make([]int64, len(parts))
	for i, p := range parts {
		m.Parts[i] = p.Size
	}
	return m, nil
}

// Splice returns m with its bytes [off, off+n) replaced by repl's, sharing
// m's chunks outside that range; the result is not multipart. It fails
// when the result would mix inline bytes with chunks (Overwrite never
// asks for that) and, like Slice, panics when the range is not within m.
func (m *Manifest) Splice(off, n int64, repl *Manifest) (*Manifest, error) {
	if off < 0 || n < 0 || off > m.Size-n {
		panic(fmt.Sprintf("data: Splice(%d, %d) of %d bytes", off, n, m.Size))
	}
	s, err := join(m.Slice(0, off), repl, m.Slice(off+n, m.Size-off-n))
	if err != nil {
		return nil, fmt.Errorf("splice: %w", err)
	}
	return s, nil
}

// join concatenates manifests. A range that continues the previous one in
// the same chunk, or a hole that follows a hole, is merged into it, so
// splitting a manifest and joining the pieces gives back the original
// list rather than a fragmented one.
func join(ms ...*Manifest) (*Manifest, error) {
	j := new(Manifest)
	for _, m := range ms {
		if len(m.Inline) > 0 && len(j.Chunks) > 0 || len(m.Chunks) > 0 && len(j.Inline) > 0 {
			return nil, errMixed
		}
		j.Size += m.Size
		j.Inline = append(j.Inline, m.Inline...)
		for _, c := range m.Chunks {
			if k := len(j.Chunks) - 1; k >= 0 {
				if p := j.Chunks[k]; bytes.Equal(p.Id, c.Id) && (c.Hole() || p.Offset+p.Length == c.Offset) {
					p.Length += c.Length
					continue
				}
			}
			// A new Chunk, never c itself: merging above modifies it.
			j.Chunks = append(j.Chunks, &Chunk{Id: c.Id, Offset: c.Offset, Length: c.Length})
		}
	}
	return j, nil
}

// Widen returns the range a writer rewrites to change the bytes
// [off, off+n) of m (growing m when the range passes its end). The range
// is widened out to the edges of the chunk ranges it overlaps, so that
// splicing the rewritten bytes back shares every untouched chunk whole and
// keeps no sliver of a touched one: a 1-byte edit rewrites one chunk, and
// the manifest does not fragment under repeated edits.
//
// A hole is not widened whole (it may be a gigabyte long): only the
// pieces of it, chunkSize long and aligned to its start, that the range
// touches are rewritten, so writes into a sparse file store about the
// bytes written.
//
// The result never starts past Size, since the gap up to off must be
// written too (Overwrite makes it a hole first). When it grows m and the
// last chunk range is shorter than chunkSize, that range is taken in as
// well, so that appends refill the tail chunk instead of adding a small
// one per commit. Inline bytes are rewritten whole.
func (m *Manifest) Widen(off, n, chunkSize int64) (woff, wn int64) {
	start, end := min(off, m.Size), off+n
	if len(m.Chunks) == 0 {
		return 0, max(end, m.Size)
	}
	var pos int64
	for _, c := range m.Chunks {
		next := pos + c.Length
		switch {
		case c.Hole() && max(pos, start) < min(next, end):
			lo := pos + (max(pos, start)-pos)/chunkSize*chunkSize
			hi := min(next, pos+(min(next, end)-pos+chunkSize-1)/chunkSize*chunkSize)
			start, end = min(start, lo), max(end, hi)
		case max(pos, start) < min(next, end): // overlaps the range
			start, end = min(start, pos), max(end, next)
		case next == m.Size && start == m.Size && end > m.Size && c.Length < chunkSize:
			start = pos
		}
		pos = next
	}
	return start, end - start
}
