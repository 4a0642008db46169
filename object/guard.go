package object

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// A ChunkGuard is shown, before a commit, every chunk the rows or part it
// writes reference, and, when a version is opened for reading, the chunks
// it names; an error aborts the commit or the open. The collector
// installs one while it runs (package gc): a commit may name a chunk the
// collector's scan never saw — a rename moves a key's only row to a key
// the scan has passed — and the guard is how the collector hears of it
// before it could delete that chunk, and how a commit or a reader learns
// that a chunk it wants is already gone.
type ChunkGuard func(ctx context.Context, ids []data.ChunkID) error

// guards are the installed ChunkGuards and the chunks readers hold.
type guards struct {
	// commits is held shared by every commit from its guard check to its
	// end, and exclusively while a guard is installed: a new guard is
	// shown every commit that ends after GuardChunks returns.
	commits sync.RWMutex
	mu      sync.Mutex
	next    int
	fns     map[int]ChunkGuard

	// held counts, per chunk, the open readers whose version names it
	// (see Reading).
	heldMu sync.Mutex
	held   map[data.ChunkID]int32
}

// GuardChunks installs g until the returned function is called. It waits
// for the commits in progress to end.
func (s *Service) GuardChunks(g ChunkGuard) (remove func()) {
	s.guards.commits.Lock()
	defer s.guards.commits.Unlock()
	s.guards.mu.Lock()
	defer s.guards.mu.Unlock()
	if s.guards.fns == nil {
		s.guards.fns = map[int]ChunkGuard{}
	}
	id := s.guards.next
	s.guards.next++
	s.guards.fns[id] = g
	return func() {
		s.guards.mu.Lock()
		delete(s.guards.fns, id)
		s.guards.mu.Unlock()
	}
}

func (g *guards) list() []ChunkGuard {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.fns) == 0 {
		return nil
	}
	fns := make([]ChunkGuard, 0, len(g.fns))
	for _, fn := range g.fns {
		fns = append(fns, fn)
	}
	return fns
}

// guarded runs commit once every guard accepted the chunks refs lists;
// refs is only called when a guard is installed.
func (s *Service) guarded(ctx context.Context, refs func() ([]data.ChunkID, error), commit func() error) error {
	s.guards.commits.RLock()
	defer s.guards.commits.RUnlock()
	if fns := s.guards.list(); len(fns) > 0 {
		ids, err := refs()
		if err != nil {
			return err
		}
		for _, g := range fns {
			if len(ids) == 0 {
				break
			}
			if err := g(ctx, ids); err != nil {
				return err
			}
		}
	}
	return commit()
}

// rowChunks lists the chunks the rows that ms write into b reference. A
// row that shares the manifest of another (meta.Version.ManifestOf, a
// rename in the mount) references that row's chunks, read here: rows never
// change, so they are the chunks the commit gives the new row, or the
// commit fails because the row is gone. A rename moving a key's only row
// behind the collector's scan is what the guard is for.
func (s *Service) rowChunks(ctx context.Context, b meta.Bucket, ms []meta.Mutation) ([]data.ChunkID, error) {
	var ids []data.ChunkID
	for _, m := range ms {
		if m.Put == nil {
			continue
		}
		man := m.Put.Manifest
		if ref := m.Put.ManifestOf; ref != nil {
			v, err := s.meta.Get(ctx, b, ref.Key, ref.ID)
			switch {
			case errors.Is(err, meta.ErrNoSuchVersion):
				continue // the commit fails, or the row is one ms writes
			case err != nil:
				return nil, err
			}
			man = v.Manifest
		}
		if len(man) == 0 {
			continue
		}
		dm, err := data.DecodeManifest(man)
		if err != nil {
			return nil, err
		}
		ids = append(ids, dm.ChunkIDs()...)
	}
	return ids, nil
}

// Reading reports whether a version naming chunk id is open for reading
// through this Service (Open, Get, ReaderAt, until their Close). The
// collector keeps such chunks whatever the rows say: a reader keeps the
// version it opened, even one removed meanwhile (a DELETE by version id,
// an expiry), for as long as it stays open.
func (s *Service) Reading(id data.ChunkID) bool {
	s.guards.heldMu.Lock()
	defer s.guards.heldMu.Unlock()
	return s.guards.held[id] > 0
}

// A hold is a reader's claim on the chunks of the version it reads. It
// counts every stored range of the manifest, a chunk as often as it
// appears, and releases them the same way: no set of ids to build.
type hold struct {
	g        *guards
	m        *data.Manifest
	released atomic.Bool
}

// count adds d to the readers of every chunk m stores bytes in.
func (g *guards) count(m *data.Manifest, d int32) {
	g.heldMu.Lock()
	defer g.heldMu.Unlock()
	if g.held == nil {
		g.held = map[data.ChunkID]int32{}
	}
	for _, c := range m.Chunks {
		if c.Hole() {
			continue
		}
		id := data.ChunkID(c.Id)
		if g.held[id] += d; g.held[id] <= 0 {
			delete(g.held, id)
		}
	}
}

// hold claims the chunks m names for a reader until the hold is released.
// A collector running now may have decided to delete some of them before
// they were claimed (the version's row was gone when its scan passed): its
// guard waits for such a deletion to end and fails the open if the chunk
// went, rather than leaving the reader to fail mid-stream. A manifest
// with no chunks (inline bytes, holes) needs no hold: nil.
func (s *Service) hold(ctx context.Context, m *data.Manifest) (*hold, error) {
	if len(m.Chunks) == 0 {
		return nil, nil
	}
	g := &s.guards
	g.count(m, 1)
	h := &hold{g: g, m: m}
	// Claimed first, checked second: a guard installed after the list
	// was taken belongs to a run whose sweep sees the claim.
	if fns := g.list(); len(fns) > 0 {
		ids := m.ChunkIDs()
		for _, fn := range fns {
			if err := fn(ctx, ids); err != nil {
				h.release()
				return nil, err
			}
		}
	}
	return h, nil
}

// release gives the chunks back; only the first call counts.
func (h *hold) release() {
	if h == nil || h.released.Swap(true) {
		return
	}
	h.g.count(h.m, -1)
}

// A Reader gives random access to a version's bytes (see ReaderAt) and
// holds its chunks against the collector until Close.
type Reader struct {
	*data.ReaderAt
	hold *hold
}

// Close releases the version's chunks. Reads after it still work while
// the chunks last; a second Close does nothing.
func (r *Reader) Close() error {
	r.hold.release()
	return nil
}

// heldBody is a streamed range (Open) that releases its hold once the
// stream is closed, when no read of it can be in flight.
type heldBody struct {
	io.ReadCloser
	hold *hold
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.hold.release()
	return err
}
