package fs

import (
	"context"
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
}

// A page is a piece of a directory's listing: the keys after from, up to
// and including to ("" when it reaches the end of the directory).
type page struct {
	from, to string
	files    map[string]*meta.Version
	dirs     map[string]bool // keys that are directories
	commits  uint64          // the Service's count when it was read
	read     time.Time
}

// covers reports whether p answers for key.
func (p *page) covers(key string) bool {
	return key > p.from && (p.to == "" || key <= p.to)
}

// stat answers what key, in the directory of prefix, names: from a page
// of a walk when one covers it and is still fresh (no commit in this
// process since it was read, and younger than the entry timeout, the
// bound on what other processes' changes the mount may miss anyway),
// else from the store. A directory is always asked of the store: its
// marker holds its attributes.
func (f *fsys) stat(ctx context.Context, prefix, key string) (object.Node, error) {
	if f.opts.EntryTimeout <= 0 {
		return f.svc.Stat(ctx, f.bucket, key)
	}
	a := &f.ahead
	a.mu.Lock()
	w, p := a.find(prefix, key, f.svc.Commits(), time.Now().Add(-f.opts.EntryTimeout))
	if p != nil && !p.dirs[key] {
		w.last = key
		a.mu.Unlock()
		return object.Node{File: p.files[key]}, nil
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
	a.mu.Unlock()
	p = f.readPage(ctx, prefix, after, size)
	ok := p != nil && p.covers(key) && !p.dirs[key]
	a.mu.Lock()
	w.page, w.size = p, min(2*size, maxPage)
	if !ok { // not a walk after all
		w.page, w.size, w.ahead = nil, firstPage, 0
	}
	a.mu.Unlock()
	if !ok {
		return f.svc.Stat(ctx, f.bucket, key)
	}
	return object.Node{File: p.files[key]}, nil
}

// find returns the walk in the directory of prefix that is closest
// behind key (threads walking parts of one directory each follow their
// own), or nil, and its page if that covers key and was read by a count
// of commits and after a time still current; mu is held.
func (a *lookahead) find(prefix, key string, commits uint64, since time.Time) (*walk, *page) {
	var best *walk
	for i := len(a.walks) - 1; i >= 0; i-- {
		w := a.walks[i]
		if w.prefix != prefix {
			continue
		}
		if p := w.page; p != nil && p.covers(key) {
			if p.commits != commits || p.read.Before(since) {
				w.page = nil
				return w, nil
			}
			a.touch(i)
			return w, p
		}
		if w.last < key && (best == nil || w.last > best.last) {
			best = w
		}
	}
	return best, nil
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

// readPage reads size entries of the directory of prefix after the key
// after; nil if the store fails (the lookup then asks it itself).
func (f *fsys) readPage(ctx context.Context, prefix, after string, size int) *page {
	commits := f.svc.Commits() // before the read: a commit during it makes the page stale
	res, err := f.svc.List(ctx, f.bucket, meta.ListOptions{Prefix: prefix, Delimiter: "/", After: after, MaxKeys: size})
	if err != nil {
		return nil
	}
	p := &page{from: after, files: make(map[string]*meta.Version, len(res.Objects)), dirs: map[string]bool{}, commits: commits, read: time.Now()}
	if res.IsTruncated {
		p.to = res.Next
	}
	for _, v := range res.Objects {
		p.files[v.Key] = v
	}
	for _, d := range res.CommonPrefixes {
		p.dirs[strings.TrimSuffix(d, "/")] = true
	}
	return p
}
