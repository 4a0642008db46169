package fs

import (
	"strings"
	"sync"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/stratafs/object"
)

// An invalidator makes the kernel forget what it cached about keys that
// changed behind its back (an S3 write in this process), so the mount
// shows them at once rather than after the cache timeouts. The core's
// watcher runs on the committing goroutine, which may be serving a FUSE
// request of this very mount, while the kernel may hold that request's
// directory lock until a notification about it is answered: so changes
// are queued and the kernel is notified from a goroutine of its own.
type invalidator struct {
	root *fusefs.Inode

	mu sync.Mutex
	// keys holds the changed keys not notified yet; true marks a key
	// whose change by the mount itself failed to commit.
	keys map[string]bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newInvalidator(root *fusefs.Inode) *invalidator {
	q := &invalidator{root: root, keys: map[string]bool{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// add queues key, changed by someone else. It never blocks.
func (q *invalidator) add(key string) { q.queue(key, false) }

// failed queues key, whose change by the mount failed to commit: what
// the mount showed of it was never stored. It never blocks.
func (q *invalidator) failed(key string) { q.queue(key, true) }

func (q *invalidator) queue(key string, failed bool) {
	q.mu.Lock()
	q.keys[key] = q.keys[key] || failed
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *invalidator) run() {
	defer close(q.done)
	for {
		select {
		case <-q.stop:
			return
		case <-q.wake:
		}
		q.mu.Lock()
		keys := q.keys
		q.keys = map[string]bool{}
		q.mu.Unlock()
		for key, failed := range keys {
			q.invalidate(key, failed)
		}
	}
}

func (q *invalidator) close() {
	close(q.stop)
	<-q.done
}

// invalidate walks the inodes the kernel knows along key's path. The first
// name it does not know may be cached as absent: that entry is dropped.
// For a file the entry is dropped, so that the next lookup finds the new
// version (a new inode: the old one stays with the processes that have it
// open); for a directory marker the directory's attributes. Directories
// on the way are left alone: dropping an entry that is a process's
// working directory would make it look deleted. A file whose own change
// failed keeps its inode, which remembers the failure for the next close
// or fsync: its attributes and cached pages are dropped instead, and it
// reads its version from the store again.
func (q *invalidator) invalidate(key string, failed bool) {
	marker := strings.HasSuffix(key, "/")
	names := strings.Split(strings.TrimSuffix(key, "/"), "/")
	if names[0] == versionsName {
		return // shadowed by the mount's own
	}
	in := q.root
	for i, name := range names {
		if !validName(name) {
			return
		}
		ch := in.GetChild(name)
		last := i == len(names)-1
		switch {
		case ch == nil:
			in.NotifyEntry(name)
			return
		case last && marker:
			if d, ok := ch.Operations().(*dirNode); ok {
				d.forget()
			}
			ch.NotifyContent(-1, 0) // attributes only
			return
		case last && failed && !ch.IsDir():
			ch.NotifyContent(0, 0) // attributes and pages
			return
		case last, !ch.IsDir(): // a file; or one that is now a directory too
			in.NotifyEntry(name)
			return
		}
		in = ch
	}
}

// watch queues the changes of the mounted bucket committed by others.
func (f *fsys) watch(q *invalidator) func(object.Change) {
	return func(c object.Change) {
		if c.Bucket == f.bucket && !f.own.has(c.Key) {
			q.add(c.Key)
		}
	}
}
