package fs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// Names of a directory are often looked up one after another in the order
// the directory lists them (stat over a sorted list, find, rsync and ls -l
// where the kernel does not use readdirplus). The mount then reads pages
// of the listing ahead, and answers the next lookups from them, rather
// than asking the store once per name.
const (
	// maxWalks is how many walks the mount follows at once (threads and
	// directories being walked); each holds at most one page.
	maxWalks = 8
	// firstPage and maxPage bound a page's entries: it starts small, so
	// a walk that turns out not to be one costs little, and doubles while
	// the walk goes on.
	firstPage = 16
	maxPage   = 512
)

// lookahead holds the walks the mount is following.
type lookahead struct {
	mu    sync.Mutex
	walks []*walk // the least recently used first
	// reading holds the pages being read from the store: a commit
	// during the read is marked in them as in the pages of the walks.
	reading []*page
}

// A walk is a series of lookups in one directory in listing order.
type walk struct {
	prefix string // the directory's
	last   string // the last key looked up
	// ahead counts the lookups of keys after last that the store
	// answered one by one: from the third a page is read (lookups in
	// no order rarely make three in a row).
	ahead int
	size  int // of the next page
	page  *page
	// next is the page after page, read in the background (see
	// readNext) so that the walk finds it read when it gets there.
	next *page
}

// A page is a piece of the listing of the directory of prefix: the keys
// after from, up to and including to ("" when it reaches the end of the
// directory, or while the page is being read). A commit of this process
// does not make the whole page stale, only the name it changed (see
// changed): a thread renaming or rewriting the files of a directory in
// order keeps its page, where dropping it at every commit cost a page
// read per commit per walk, under the directory's lock in the kernel.
type page struct {
	prefix   string
	from, to string
	files    map[string]*meta.Version
	dirs     map[string]bool // keys that are directories
	// changed holds the names of the page's range that a commit of this
	// process changed since the read began: the store answers for them.
	changed map[string]bool
	read    time.Time // when the read began
	// done, for a page read in the background, is closed once it is
	// read; ok says whether the store answered.
	done chan struct{}
	ok   bool
}

// covers reports whether p's range holds key.
func (p *page) covers(key string) bool {
	return key > p.from && (p.to == "" || key <= p.to)
}

// answers reports whether p tells what key is: the page covers it, the
// key is no directory (whose marker holds its attributes) and no commit
// of this process changed it since the page was read.
func (p *page) answers(key string) bool {
	return p.covers(key) && !p.dirs[key] && !p.changed[key]
}

// stat answers what key, in the directory of prefix, names: from a page
// of a walk when one answers for it and is younger than the entry timeout
// (the bound on what other processes' changes the mount may miss anyway;
// this process's commits are marked in the pages as they land), else from
// the store.
func (f *fsys) stat(ctx context.Context, prefix, key string) (object.Node, error) {
	if f.opts.EntryTimeout <= 0 {
		return f.svc.Stat(ctx, f.bucket, key)
	}
	a := &f.ahead
	since := time.Now().Add(-f.opts.EntryTimeout)
	a.mu.Lock()
	w, p, wait := a.find(prefix, key, since)
	for wait != nil { // the page that holds key is being read
		a.mu.Unlock()
		<-wait
		a.mu.Lock()
		w, p, wait = a.find(prefix, key, since)
	}
	if p != nil {
		w.last = key
		answered := p.answers(key)
		f.readNext(w)
		a.mu.Unlock()
		if answered {
			return object.Node{File: p.files[key]}, nil
		}
		return f.svc.Stat(ctx, f.bucket, key)
	}
	if w == nil {
		a.startLocked(prefix, key)
		a.mu.Unlock()
		return f.svc.Stat(ctx, f.bucket, key)
	}
	// A walk goes on past its page, or has gone on long enough without
	// one: read the next page, which holds key too.
	after, size := w.last, w.size
	w.last = key
	if w.ahead++; w.ahead < 2 && w.page == nil {
		a.mu.Unlock()
		return f.svc.Stat(ctx, f.bucket, key)
	}
	p = a.beginLocked(prefix, after)
	a.mu.Unlock()
	ok := f.readPage(ctx, p, size) && p.covers(key) && !p.dirs[key]
	a.mu.Lock()
	a.reading = slices.DeleteFunc(a.reading, func(r *page) bool { return r == p })
	w.page, w.next, w.size = p, nil, min(2*size, maxPage)
	if !ok { // not a walk after all
		w.page, w.size, w.ahead = nil, firstPage, 0
	} else {
		f.readNext(w)
	}
	answered := ok && !p.changed[key]
	a.mu.Unlock()
	if !answered {
		return f.svc.Stat(ctx, f.bucket, key)
	}
	return object.Node{File: p.files[key]}, nil
}

// readNext starts reading the page after w's in the background, unless
// it is read already or w's page ends the directory: a walk that reached
// a page goes on to the next one, and finds it read (or being read)
// rather than waiting for the store there. mu is held.
func (f *fsys) readNext(w *walk) {
	p := w.page
	if p == nil || p.to == "" || w.next != nil {
		return
	}
	a := &f.ahead
	n := a.beginLocked(w.prefix, p.to)
	n.done = make(chan struct{})
	w.next = n
	size := w.size
	w.size = min(2*size, maxPage)
	go func() {
		// The read outlives the lookup that started it.
		ok := f.readPage(context.Background(), n, size)
		a.mu.Lock()
		a.reading = slices.DeleteFunc(a.reading, func(r *page) bool { return r == n })
		n.ok = ok
		a.mu.Unlock()
		close(n.done)
	}()
}

// peek answers what key, in the directory of prefix, names from a page
// that answers for it and is younger than the entry timeout, as stat
// does, but without following a walk; ok is false when no page answers.
// A change of a name checks it with peek after the kernel has looked the
// name up (the lookup followed the walk), and the caller first settles
// the changes of the mount queued for key.
func (f *fsys) peek(prefix, key string) (st object.Node, ok bool) {
	if f.opts.EntryTimeout <= 0 {
		return object.Node{}, false
	}
	a := &f.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	_, p, _ := a.find(prefix, key, time.Now().Add(-f.opts.EntryTimeout))
	if p == nil || !p.answers(key) {
		return object.Node{}, false
	}
	return object.Node{File: p.files[key]}, true
}

// statChange answers what key names for a change of it (create, rename):
// from a page if one answers, else from the store. The changes queued
// for key are settled first.
func (f *fsys) statChange(ctx context.Context, key string) (object.Node, error) {
	f.j.settle(key, key+"/")
	if st, ok := f.peek(dirOf(key), key); ok {
		return st, nil
	}
	return f.svc.Stat(ctx, f.bucket, key)
}

// whole returns v with its manifest. Listings (the pages, readdir) ask
// for attributes only, and inodes keep no more (see light): most of a
// small file's row is its inline bytes. A version still queued is the
// journal's; one committed is read again by its id (see
// object.Service.Whole): should it commit in between, the store has it.
// A queued version that shares another's bytes by naming it (a rename,
// a chmod) has the bytes of the version named, queued or committed.
func (f *fsys) whole(ctx context.Context, v *meta.Version) (*meta.Version, error) {
	if !v.NoManifest {
		return v, nil
	}
	q := f.j.queued(v.Key, v.ID)
	switch {
	case q == nil:
		return f.svc.Whole(ctx, f.bucket, v)
	case q.ManifestOf == nil:
		return q, nil
	}
	o, err := f.whole(ctx, &meta.Version{Key: q.ManifestOf.Key, ID: q.ManifestOf.ID, NoManifest: true})
	if err != nil {
		// q may have committed meanwhile and removed the version it
		// named (a rename in an unversioned bucket): the store has q.
		if w, werr := f.svc.Whole(ctx, f.bucket, v); werr == nil {
			return w, nil
		}
		return nil, err
	}
	return q.Sharing(o)
}

// light returns v without its manifest, as a listing returns it (a copy;
// nil for nil): what an inode keeps of its version. The kernel may hold
// an inode for every file it saw; with their bytes 100,000 files of 4 KiB
// written through the mount kept 611 MB of heap until it forgot them.
func light(v *meta.Version) *meta.Version {
	if v == nil || v.NoManifest {
		return v
	}
	c := *v
	c.DropManifest()
	return &c
}

// dirOf returns the prefix of the directory that holds key.
func dirOf(key string) string { return key[:strings.LastIndexByte(key, '/')+1] }

// find returns the walk in the directory of prefix that is closest
// behind key (threads walking parts of one directory each follow their
// own), or nil, and its page if that covers key and was read after
// since. When the closest walk's next page, read after its page, is the
// one that covers key it becomes the walk's page; while it is still
// being read, find returns a channel closed once it is (the caller waits,
// then asks again). Only the closest walk's next page is considered:
// a page read ahead of one thread's walk is not taken by another's
// lookups. mu is held.
func (a *lookahead) find(prefix, key string, since time.Time) (*walk, *page, <-chan struct{}) {
	var best *walk
	at := 0
	for i := len(a.walks) - 1; i >= 0; i-- {
		w := a.walks[i]
		if w.prefix != prefix {
			continue
		}
		if p := w.page; p != nil && p.covers(key) {
			if p.read.Before(since) {
				w.page = nil
				return w, nil, nil
			}
			a.touch(i)
			return w, p, nil
		}
		if w.last < key && (best == nil || w.last > best.last) {
			best, at = w, i
		}
	}
	if best == nil || best.next == nil || key <= best.next.from {
		return best, nil, nil
	}
	n := best.next
	select {
	case <-n.done:
	default:
		return best, nil, n.done
	}
	best.next = nil
	if !n.ok || !n.covers(key) || n.read.Before(since) {
		return best, nil, nil // the walk jumped past it
	}
	best.page = n
	a.touch(at)
	return best, n, nil
}

// touch makes walk i the most recently used; mu is held.
func (a *lookahead) touch(i int) {
	w := a.walks[i]
	a.walks = append(append(a.walks[:i], a.walks[i+1:]...), w)
}

// startLocked begins following a walk from key, forgetting the least
// recently used one if there are maxWalks; mu is held.
func (a *lookahead) startLocked(prefix, key string) {
	if len(a.walks) == maxWalks {
		a.walks = a.walks[1:]
	}
	a.walks = append(a.walks, &walk{prefix: prefix, last: key, size: firstPage})
}

// beginLocked returns a page of the directory of prefix after the key
// after, to be read, and counts it among the pages being read (the caller
// takes it off once it is read); mu is held.
func (a *lookahead) beginLocked(prefix, after string) *page {
	p := &page{prefix: prefix, from: after, read: time.Now()}
	a.reading = append(a.reading, p)
	return p
}

// changed marks key, which a commit of this process changed, in the pages
// of its directory, read or being read, that cover it: the name it lies
// under (itself, or the subdirectory that holds it) is then asked of the
// store. It runs after the commit landed and before the journal lets
// anyone wait for it, so no lookup that must see the change meets a page
// that does not know of it.
func (a *lookahead) changed(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mark := func(p *page) {
		if p == nil || !strings.HasPrefix(key, p.prefix) {
			return
		}
		name := key[len(p.prefix):]
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		}
		if k := p.prefix + name; p.covers(k) {
			if p.changed == nil {
				p.changed = map[string]bool{}
			}
			p.changed[k] = true
		}
	}
	for _, w := range a.walks {
		mark(w.page)
		mark(w.next)
	}
	for _, p := range a.reading {
		mark(p)
	}
}

// readPage reads p, size entries from its start, and reports whether the
// store answered (if not, the lookup asks it itself). p's range is set
// under the lookahead's lock: changed reads it meanwhile.
func (f *fsys) readPage(ctx context.Context, p *page, size int) bool {
	res, err := f.svc.List(ctx, f.bucket, meta.ListOptions{Prefix: p.prefix, Delimiter: "/", After: p.from, MaxKeys: size, Attrs: true})
	if err != nil {
		return false
	}
	p.files = make(map[string]*meta.Version, len(res.Objects))
	p.dirs = map[string]bool{}
	for _, v := range res.Objects {
		p.files[v.Key] = v
	}
	for _, d := range res.CommonPrefixes {
		p.dirs[strings.TrimSuffix(d, "/")] = true
	}
	if res.IsTruncated {
		f.ahead.mu.Lock()
		p.to = res.Next
		f.ahead.mu.Unlock()
	}
	return true
}
