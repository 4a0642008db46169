package object

import (
	"sync"
	"sync/atomic"

	"github.com/stratafs/stratafs/meta"
)

// A Change names a key whose rows a commit changed.
type Change struct {
	Bucket, Key string
}

// Watch registers fn to be called after every commit of this Service, once
// per changed key, on the committing goroutine: it must be quick and must
// not call back into the Service. The mount uses it to invalidate kernel
// caches the moment an S3 write lands in the same process. The returned
// function unregisters fn.
func (s *Service) Watch(fn func(Change)) (cancel func()) {
	return s.watchers.add(fn)
}

type watchers struct {
	commits atomic.Uint64

	mu   sync.RWMutex
	next int
	fns  map[int]func(Change)
}

func (w *watchers) add(fn func(Change)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(Change){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		delete(w.fns, id)
		w.mu.Unlock()
	}
}

// Commits counts the commits this Service has made. A cache of what the
// store answered may keep serving, as far as this process's writes are
// concerned, while the count has not changed since it was read.
func (s *Service) Commits() uint64 { return s.watchers.commits.Load() }

func (s *Service) notify(bucket string, ms []meta.Mutation) {
	s.watchers.commits.Add(1)
	s.watchers.mu.RLock()
	defer s.watchers.mu.RUnlock()
	for _, fn := range s.watchers.fns {
		for _, m := range ms {
			fn(Change{Bucket: bucket, Key: m.Key})
		}
	}
}
