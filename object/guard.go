package object

import (
	"context"
	"sync"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// A ChunkGuard is shown, before a commit, every chunk the rows or part it
// writes reference; an error aborts the commit. The collector installs
// one while it runs (package gc): a commit may name a chunk the
// collector's scan never saw — a rename moves a key's only row to a key
// the scan has passed — and the guard is how the collector hears of it
// before it could delete that chunk, and how a commit learns that a chunk
// it wants to share is already gone.
type ChunkGuard func(ctx context.Context, ids []data.ChunkID) error

// guards are the installed ChunkGuards.
type guards struct {
	// commits is held shared by every commit from its guard check to its
	// end, and exclusively while a guard is installed: a new guard is
	// shown every commit that ends after GuardChunks returns.
	commits sync.RWMutex
	mu      sync.Mutex
	next    int
	fns     map[int]ChunkGuard
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

// rowChunks lists the chunks the rows that ms write reference.
func rowChunks(ms []meta.Mutation) ([]data.ChunkID, error) {
	var ids []data.ChunkID
	for _, m := range ms {
		if m.Put == nil || len(m.Put.Manifest) == 0 {
			continue
		}
		man, err := data.DecodeManifest(m.Put.Manifest)
		if err != nil {
			return nil, err
		}
		ids = append(ids, man.ChunkIDs()...)
	}
	return ids, nil
}
