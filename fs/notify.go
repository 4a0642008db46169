package fs

import (
	"strings"
	"sync"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/stratafs/object"
)

// An invalidator makes the kernel forget what it cached about keys that
// changed behind its back (an S3 write in this process), so the mount
// shows them at once rather than after the cache timeouts. The kernel is
// notified from a goroutine of the invalidator's own, and the committer of
// the change waits for it (see watch): when an S3 client has its answer,
// the mount shows the change.
type invalidator struct {
	root *fusefs.Inode

	mu sync.Mutex
	// keys holds the changed keys not notified yet; true marks a key
	// whose change by the mount itself failed to commit.
	keys map[string]bool
	// notified is closed once the keys queued so far are notified.
	notified chan struct{}

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// maxNotifyWait bounds how long a commit waits for the kernel to take a
// notification. The kernel takes the directory's lock to drop an entry,
// and the request holding it may wait for something the committer holds
// (the journal of another mount of the bucket, a mount starting); past
// the bound the notification is still made, only not waited for.
const maxNotifyWait = time.Second

// journaled holds the keys being committed by the journal of any mount
// in this process, qualified by their bucket ("bucket/key"): the
// journals' goroutines never wait for a notification, since requests of
// the mounts they serve may wait for them.
var journaled ownKeys

func newInvalidator(root *fusefs.Inode) *invalidator {
	q := &invalidator{root: root, keys: map[string]bool{}, notified: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// add queues key, changed by someone else. It never blocks.
func (q *invalidator) add(key string) { q.queue(key, false) }

// addWait queues key, changed by someone else, and waits until the
// kernel is notified, for maxNotifyWait at most.
func (q *invalidator) addWait(key string) {
	notified := q.queue(key, false)
	t := time.NewTimer(maxNotifyWait)
	defer t.Stop()
	select {
	case <-notified:
	case <-t.C:
	case <-q.done:
	}
}

// failed queues key, whose change by the mount failed to commit: what
// the mount showed of it was never stored. It never blocks.
func (q *invalidator) failed(key string) { q.queue(key, true) }

// queue queues key and returns a channel closed once it is notified.
func (q *invalidator) queue(key string, failed bool) <-chan struct{} {
	q.mu.Lock()
	q.keys[key] = q.keys[key] || failed
	notified := q.notified
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return notified
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
		keys, notified := q.keys, q.notified
		q.keys, q.notified = map[string]bool{}, make(chan struct{})
		q.mu.Unlock()
		for key, failed := range keys {
			q.invalidate(key, failed)
		}
		close(notified)
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
	if virtualName(names[0]) {
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

// watch invalidates the changes of the mounted bucket committed by
// others, on their committing goroutine: an S3 write waits until the
// kernel is told, so that its client, once answered, finds it in the
// mount; another mount's journal does not wait.
func (f *fsys) watch(q *invalidator) func(object.Change) {
	return func(c object.Change) {
		switch {
		case c.Bucket != f.bucket || f.own.has(c.Key):
		case journaled.has(c.Bucket + "/" + c.Key):
			q.add(c.Key)
		default:
			q.addWait(c.Key)
		}
	}
}
