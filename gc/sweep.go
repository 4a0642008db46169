package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
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
	ledger  meta.Ledger
	reading func(data.ChunkID) bool
	// since is when the sweep began, by the Service's clock: what it
	// condemns it condemns since then. due is since minus the grace
	// period: a chunk condemned no later than due may be deleted.
	since, due time.Time
	// condemn and executed gather the ledger's changes, written a full
	// ledger batch at a time (flushLedger): chunks to condemn, and chunks
	// deleted whose records go. Records written late only delay a
	// deletion; those of deleted chunks left by a crash are overdue, and
	// the next run drops them.
	condemn, executed [][16]byte

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
		ledger:   svc.Meta(),
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
	id       data.ChunkID
	size     int64
	modified time.Time
}

// referenced reports whether the run found id referenced.
func (s *sweeper) referenced(id data.ChunkID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs.has(id)
}

// collect decides on a batch of chunks the walk found unreferenced and
// past the grace period, by the ledger (meta.Ledger): those still
// unreferenced and not being read are deleted if a run condemned them by
// s.due, condemned since s.since if no run did, and left alone if one
// did later. It returns the chunks deleted and the number condemned; a
// dry run changes nothing and returns what it would have done.
func (s *sweeper) collect(ctx context.Context, batch []chunk, dry bool) (gone []chunk, condemned int, err error) {
	ids := make([][16]byte, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	recs, err := s.ledger.Condemnations(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	since := make(map[data.ChunkID]time.Time, len(recs))
	for _, c := range recs {
		since[c.Chunk] = c.Since
	}
	var doomed []chunk
	fresh := ids[:0]
	s.mu.Lock()
	for _, c := range batch {
		if s.refs.has(c.id) || s.reading(c.id) {
			continue
		}
		switch t, ok := since[c.id]; {
		case !ok:
			fresh = append(fresh, c.id)
		case !t.After(s.due):
			if !dry {
				s.gone.add(c.id)
				s.deleting[c.id] = true
			}
			doomed = append(doomed, c)
		}
	}
	s.mu.Unlock()
	if dry {
		return doomed, len(fresh), nil
	}
	defer func() {
		s.mu.Lock()
		clear(s.deleting)
		s.done.Broadcast()
		s.mu.Unlock()
	}()
	s.condemn = append(s.condemn, fresh...)
	n := 0
	for _, c := range doomed {
		if err = s.data.Delete(ctx, c.id); err != nil {
			break
		}
		s.executed = append(s.executed, c.id)
		n++
	}
	if err == nil && max(len(s.condemn), len(s.executed)) >= meta.MaxLedgerBatch {
		err = s.flushLedger(ctx, false)
	}
	return doomed[:n], len(fresh), err
}

// flushLedger writes the gathered changes to the ledger, by full batches
// unless all is set.
func (s *sweeper) flushLedger(ctx context.Context, all bool) error {
	for _, q := range []struct {
		ids   *[][16]byte
		write func(context.Context, [][16]byte) error
	}{
		{&s.condemn, func(ctx context.Context, ids [][16]byte) error { return s.ledger.Condemn(ctx, s.since, ids) }},
		{&s.executed, s.ledger.Pardon},
	} {
		for len(*q.ids) >= meta.MaxLedgerBatch || all && len(*q.ids) > 0 {
			n := min(len(*q.ids), meta.MaxLedgerBatch)
			if err := q.write(ctx, (*q.ids)[:n]); err != nil {
				return err
			}
			*q.ids = append((*q.ids)[:0], (*q.ids)[n:]...)
		}
	}
	return nil
}

// guard installs the sweeper as a guard of svc's commits until the
// returned function is called.
func (s *sweeper) guard(svc *object.Service) func() { return svc.GuardChunks(s.pin) }
