package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/object"
)

// A sweeper holds the chunks a run found referenced and deletes the
// others, in step with the writers of its process.
//
// The mark (every row and upload part, bucket by bucket, key by key) is
// not a snapshot: a commit can make a chunk referenced only from a place
// the scan has passed, say a rename in an unversioned bucket that moves
// a key's only row to a key before the scan's position. The grace period
// covers fresh chunks only; a rename shares old ones. So the sweeper is
// also an object.ChunkGuard: every commit of the process shows it the
// chunks its rows or part reference before it commits, and pin marks
// them referenced. A commit that names a chunk this sweep may already
// have deleted (the copy of a version deleted meanwhile) is checked
// against the chunk store and refused if the chunk is gone, so no row
// ever names a collected chunk. Deletion decisions and pins are taken
// under one lock, and a pin waits for the batch being deleted, so the
// two cannot cross.
//
// Readers of the process are guarded the same way: a version open for
// reading (object.Service.Reading) keeps its chunks even when its row is
// gone, and opening one shows the guard its chunks first.
type sweeper struct {
	data    data.Store
	reading func(data.ChunkID) bool

	mu   sync.Mutex
	done sync.Cond // signalled when a batch has been deleted
	refs *filter   // chunks referenced: marked by the scan or pinned
	gone *filter   // chunks this sweep may have deleted
	// deleting holds the batch being deleted.
	deleting map[data.ChunkID]bool
}

func newSweeper(svc *object.Service, chunks int) *sweeper {
	// Pins during the run add to the referenced chunks: leave room.
	n := chunks + chunks/8
	s := &sweeper{
		data:     svc.Data(),
		reading:  svc.Reading,
		refs:     newFilter(n, falsePositive),
		gone:     newFilter(n/4, falsePositive),
		deleting: map[data.ChunkID]bool{},
	}
	s.done.L = &s.mu
	return s
}

// mark records chunks the scan found referenced.
func (s *sweeper) mark(ids []data.ChunkID) {
	s.mu.Lock()
	for _, id := range ids {
		s.refs.add(id)
	}
	s.mu.Unlock()
}

// pin is the sweeper's object.ChunkGuard.
func (s *sweeper) pin(ctx context.Context, ids []data.ChunkID) error {
	var check []data.ChunkID
	s.mu.Lock()
	for _, id := range ids {
		s.refs.add(id)
		if s.gone.has(id) {
			check = append(check, id)
		}
	}
	for s.anyDeleting(check) {
		s.done.Wait()
	}
	s.mu.Unlock()
	for _, id := range check {
		if err := exists(ctx, s.data, id); err != nil {
			return err
		}
	}
	return nil
}

func (s *sweeper) anyDeleting(ids []data.ChunkID) bool {
	for _, id := range ids {
		if s.deleting[id] {
			return true
		}
	}
	return false
}

// exists reads a chunk's first byte: ErrNoSuchChunk when it is gone.
func exists(ctx context.Context, d data.Store, id data.ChunkID) error {
	var b [1]byte
	if _, err := d.ReadAt(ctx, id, b[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("chunk %s was collected: %w", id, err)
	}
	return nil
}

// A chunk is a collectable entry of the chunk store's walk.
type chunk struct {
	id   data.ChunkID
	size int64
}

// referenced reports whether the run found id referenced.
func (s *sweeper) referenced(id data.ChunkID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs.has(id)
}

// collect deletes the chunks of batch that are still unreferenced and
// not being read, and returns those it deleted.
func (s *sweeper) collect(ctx context.Context, batch []chunk) ([]chunk, error) {
	var doomed []chunk
	s.mu.Lock()
	for _, c := range batch {
		if !s.refs.has(c.id) && !s.reading(c.id) {
			s.gone.add(c.id)
			s.deleting[c.id] = true
			doomed = append(doomed, c)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		clear(s.deleting)
		s.done.Broadcast()
		s.mu.Unlock()
	}()
	for i, c := range doomed {
		if err := s.data.Delete(ctx, c.id); err != nil {
			return doomed[:i], err
		}
	}
	return doomed, nil
}

// guard installs the sweeper as a guard of svc's commits until the
// returned function is called.
func (s *sweeper) guard(svc *object.Service) func() { return svc.GuardChunks(s.pin) }
