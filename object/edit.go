package object

import (
	"context"
	"fmt"
	"io"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// ReaderAt gives random access to version v's bytes, for readers that
// seek (the mount). Like Open it keeps reading v whatever is written
// later, even if v is removed: the caller closes the Reader when done.
func (s *Service) ReaderAt(ctx context.Context, v *meta.Version) (*Reader, error) {
	m, err := manifest(v)
	if err == nil {
		var h *hold
		if h, err = s.hold(ctx, m); err == nil {
			return &Reader{ReaderAt: data.NewReaderAt(s.data, m), hold: h}, nil
		}
	}
	return nil, fmt.Errorf("version %s: %w", v.WireID(), err)
}

// An Extent is the byte range [Off, Off+Len) of an object.
type Extent struct {
	Off, Len int64
}

// End returns the offset just past the extent.
func (e Extent) End() int64 { return e.Off + e.Len }

// EditOptions describe an Edit.
type EditOptions struct {
	Attrs
	// Size is the length of the edited object; Base is cut or grown to it.
	Size int64
	// Dirty lists, in order and without overlap, the ranges whose bytes
	// may differ from Base's; they are read from Src. Every other byte
	// below Base's end is Base's and is shared without being read; every
	// other byte past it is zero and stored as a hole (a sparse file).
	Dirty []Extent
	// Src reads the edited object's bytes at their offsets.
	Src io.ReaderAt
	// Check vets the key's head atomically, as in PutOptions.
	Check func(head *meta.Version) error
}

// Edit commits a new version of key made of base's bytes with the Dirty
// ranges rewritten, cut or grown to o.Size, in one commit. Only the chunks
// the dirty ranges touch are written (data.Overwrite); the rest are shared
// with base, so a 1-byte edit of a 1 GiB file writes one chunk. Dirty
// ranges closer than a chunk are rewritten together, so no chunk is
// written twice.
//
// The ETag of an edited version cannot be the MD5 of its bytes without
// reading them all: it is opaque (see putRow).
//
// Chunks written for a commit that fails, or superseded by a later range
// of the same edit, are deleted (best effort).
func (s *Service) Edit(ctx context.Context, bucket, key string, base *meta.Version, o EditOptions) (*meta.Version, error) {
	v, err := s.edit(ctx, bucket, key, base, o)
	if err != nil {
		return nil, fmt.Errorf("edit %s/%s: %w", bucket, key, err)
	}
	return v, nil
}

func (s *Service) edit(ctx context.Context, bucket, key string, base *meta.Version, o EditOptions) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	m, err := manifest(base)
	if err != nil {
		return nil, err
	}
	if o.Size < 0 {
		return nil, fmt.Errorf("size %d: %w", o.Size, meta.ErrInvalidArgument)
	}
	if o.Size < m.Size {
		m = m.Slice(0, o.Size)
	}
	// The rewritten ranges' digests are not kept: CRC-32C costs least.
	wo := data.WriteOptions{ChunkSize: s.opts.ChunkSize, InlineMax: s.opts.InlineMax, Digest: data.CRC32C}
	gap := int64(s.opts.ChunkSize)
	if gap <= 0 {
		gap = data.DefaultChunkSize
	}
	// written collects the chunk ranges this edit wrote, for cleanup.
	written := new(data.Manifest)
	fail := func(err error) (*meta.Version, error) {
		s.discard(written)
		return nil, err
	}
	for _, r := range rewrites(o.Dirty, o.Size, gap) {
		before := idSet(m)
		next, err := data.Overwrite(ctx, s.data, m, r.Off, r.Len, io.NewSectionReader(o.Src, r.Off, r.Len), wo)
		if err != nil {
			return fail(err)
		}
		for _, c := range next.Chunks {
			if !c.Hole() && !before[data.ChunkID(c.Id)] {
				written.Chunks = append(written.Chunks, c)
			}
		}
		m = next
	}
	if m.Size < o.Size { // grown past the last dirty range: a hole
		if m, err = data.Overwrite(ctx, s.data, m, o.Size, 0, nil, wo); err != nil {
			return fail(err)
		}
	}
	v, err := s.putRow(ctx, b, key, m, "", PutOptions{Attrs: o.Attrs, Check: o.Check})
	if err != nil {
		return fail(err)
	}
	kept := idSet(m)
	superseded := new(data.Manifest)
	for _, c := range written.Chunks {
		if !kept[data.ChunkID(c.Id)] {
			superseded.Chunks = append(superseded.Chunks, c)
		}
	}
	s.discard(superseded)
	return v, nil
}

// rewrites returns the ranges an edit rewrites, in order: the dirty ranges
// within size, with ranges closer than gap joined so that each touched
// chunk is rewritten once. The bytes between joined ranges are read back
// from the source, which holds them.
func rewrites(dirty []Extent, size, gap int64) []Extent {
	var out []Extent
	add := func(e Extent) {
		if e.Len <= 0 {
			return
		}
		if k := len(out) - 1; k >= 0 && e.Off-out[k].End() < gap {
			out[k].Len = max(out[k].End(), e.End()) - out[k].Off
			return
		}
		out = append(out, e)
	}
	for _, e := range dirty {
		add(Extent{Off: e.Off, Len: min(e.End(), size) - e.Off})
	}
	return out
}

// idSet returns the set of chunks m references.
func idSet(m *data.Manifest) map[data.ChunkID]bool {
	ids := m.ChunkIDs()
	set := make(map[data.ChunkID]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}
