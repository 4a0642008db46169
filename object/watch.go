package object

import (
	"sync"

	"github.com/stratafs/stratafs/meta"
)

// A Change names a key whose rows a commit changed.
type Change struct {
	Bucket, Key string
}

// Watch registers fn to be called after every commit of this Service, once
// per changed key, on the committing goroutine: it must be quick and must
// not call back into the Service. The mount uses it to invalidate kernel
// caches the moment an S3 write lands in the same process, and to mark
// every commit in the pages of listings it read ahead. The returned
// function unregisters fn.
func (s *Service) Watch(fn func(Change)) (cancel func()) {
	return s.watchers.add(fn)
}

type watchers struct {
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

func (s *Service) notify(bucket string, ms []meta.Mutation) {
	s.watchers.mu.RLock()
	defer s.watchers.mu.RUnlock()
	for _, fn := range s.watchers.fns {
		for _, m := range ms {
			fn(Change{Bucket: bucket, Key: m.Key})
		}
	}
}
