package fs

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
)

// A dirent is one entry of a directory listing. A file entry keeps the
// version the listing returned, so that READDIRPLUS can answer without
// asking the store again.
type dirent struct {
	name string
	mode uint32 // S_IFDIR, S_IFREG or S_IFLNK
	v    *meta.Version
	read *pageRead // of v; nil for a view of the past
}

// A pageRead says when a page of a listing of the live tree was read: a
// change of one of its files queued in the mount since then may have
// made the version the page returned stale, or removed the name.
type pageRead struct {
	j      *journal
	prefix string
	seq    uint64 // the last change queued when the page was read
}

// stale reports whether the file e, from the page r, may have changed
// in the mount since the page was read.
func (r *pageRead) stale(e dirent) bool {
	return r != nil && r.j.changedSince(r.prefix+e.name, r.seq)
}

// A pager lists a directory one page of the store's listing at a time;
// done is set with the last page.
type pager interface {
	next(ctx context.Context) (ents []dirent, done bool, err error)
}

// A dirHandle streams a listing to the kernel as it reads it: it holds one
// page of the store's listing and the last entries it handed out at most,
// so `ls` of a huge directory starts at once and memory stays flat.
// Seeking back to the start (rewinddir) starts the listing over; to an
// entry handed out lately, goes on from there (see Seekdir). go-fuse
// serializes the calls on one handle.
type dirHandle struct {
	list   func() pager
	lookup func(ctx context.Context, e dirent, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno)
	sync   func() error // waits until the mount's changes are committed

	pg   pager
	buf  []dirent
	done bool
	off  uint64 // entries handed out, "." and ".." included
	last dirent
	// taken holds the last entries handed out (maxReplay to
	// 2*maxReplay of them), so that a seek back among them hands them
	// out again rather than listing the directory over (see Seekdir).
	taken []dirent
	// plus counts the entries READDIRPLUS was answered for since the
	// listing started or the kernel last looked up an entry sent bare:
	// rewinddir does not reset it (see maxPlus).
	plus int
	// dir, if set, is the directory's inode: the entries the kernel
	// looked up are its children. probe is the first entry sent bare
	// since plus reached maxPlus that had no inode then.
	dir   *fusefs.Inode
	probe string
}

// maxReplay is how many of the last entries handed out a handle keeps
// for a seek back: more than go-fuse sends in one answer, which is what
// the kernel seeks back within when it took only part of it.
const maxReplay = 1024

// maxPlus is how many entries of one listing (one open handle, rewinddir
// included) READDIRPLUS answers with attributes; the rest are sent bare,
// and the kernel looks up those that are used. Each entry answered makes
// an inode, here and in the kernel, that stays until the kernel forgets
// it: about 1 KiB here (go-fuse's tables, the node, the version it
// shows), and the kernel keeps an unused dentry until memory runs short.
// Answering every entry of a listing of 1M files grew the server by
// 1.3 GiB. 4096 answers `ls -l` of a directory that size with no lookup
// per entry, and holds at most about 4 MiB per listing, a small part of
// the 64 MiB a listing of 1M keys may take.
//
// A process that stats what it lists makes those inodes anyway, by
// lookups, which cost more than answering READDIRPLUS: ls -l of 100,000
// files took half again as long. ls -l stats each batch of names that
// getdents returns before it asks for the next, so once the kernel has
// looked up an entry the listing sent bare, the listing answers the next
// maxPlus entries (see Lookup).
const maxPlus = 4096

var (
	_ = (fusefs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fusefs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fusefs.FileLookuper)((*dirHandle)(nil))
	_ = (fusefs.FileFsyncdirer)((*dirHandle)(nil))
)

func newDirHandle(list func() pager, lookup func(context.Context, dirent, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno), sync func() error) *dirHandle {
	h := &dirHandle{list: list, lookup: lookup, sync: sync}
	h.restart()
	return h
}

func (h *dirHandle) restart() {
	h.pg, h.done, h.off, h.taken = h.list(), false, 0, h.taken[:0]
	h.buf = []dirent{{name: ".", mode: syscall.S_IFDIR}, {name: "..", mode: syscall.S_IFDIR}}
}

func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	ctx = uninterrupted(ctx)
	for len(h.buf) == 0 {
		if h.done {
			return nil, 0
		}
		ents, done, err := h.pg.next(ctx)
		if err != nil {
			return nil, fusefs.ToErrno(err)
		}
		h.buf, h.done = ents, done
	}
	h.last, h.buf = h.buf[0], h.buf[1:]
	h.off++
	if len(h.taken) == 2*maxReplay {
		h.taken = append(h.taken[:0], h.taken[maxReplay:]...)
	}
	h.taken = append(h.taken, h.last)
	return &fuse.DirEntry{Name: h.last.name, Mode: h.last.mode, Off: h.off}, 0
}

// Seekdir moves to just after the off'th entry handed out. Listings have
// no stable positions (entries come and go between reads), so a seek
// back among the entries kept in taken hands them out again, as they
// were: counting entries from the start of a new listing would skip or
// repeat as many names as were created or removed before off meanwhile.
// A seek to 0 (rewinddir) starts the listing over, as opendir would; a
// seek further back than taken (seekdir(3) to an old telldir) too, and
// skips off entries; a seek forward reads on.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	switch {
	case off == h.off:
		return 0
	case off > 0 && off < h.off && h.off-off <= uint64(len(h.taken)):
		k := len(h.taken) - int(h.off-off)
		h.buf = append(slices.Clone(h.taken[k:]), h.buf...)
		h.taken, h.off = h.taken[:k], off
		return 0
	case off < h.off:
		h.restart()
	}
	for h.off < off {
		de, errno := h.Readdirent(ctx)
		if errno != 0 || de == nil {
			return errno
		}
	}
	return 0
}

// Lookup answers READDIRPLUS for the entry just read. An error sends
// the entry without attributes (node id 0): the kernel makes no inode
// for it and looks the name up if it needs it. Lookup does not answer
// past the first maxPlus entries of the handle's listing, unless the
// kernel looked up an entry sent bare since (see maxPlus); nor for a
// file the listing read before a change of it was made in the mount (an
// entry handed out later than its page was read, in another getdents):
// the kernel would keep the name, removed or renamed since, as there for
// the entry timeout, and open it rather than create it.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if name != h.last.name || h.last.v != nil && h.last.read.stale(h.last) {
		return nil, syscall.ENOENT
	}
	if h.plus == maxPlus {
		if h.probe == "" || h.dir.GetChild(h.probe) == nil {
			if h.probe == "" && h.dir != nil && h.dir.GetChild(name) == nil {
				h.probe = name
			}
			return nil, syscall.ENOENT
		}
		h.plus, h.probe = 0, ""
	}
	ch, errno := h.lookup(ctx, h.last, out)
	if errno == 0 {
		h.plus++
	}
	return ch, errno
}

// Fsyncdir waits until every change made in the mount before it is
// committed, and so durable: the directory's entries among them.
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if err := h.sync(); err != nil {
		return failedCommit(err)
	}
	return 0
}

// listPager lists the live keys of one directory: object.List with
// delimiter "/", one page per call, overlaid with the mount's changes
// still queued in the journal (see overlay) and with the files created in
// the mount that the store may not list yet (see draftsIn).
//
// Every name is shown, or not, by the one page whose range holds it, as
// that page was read: a name that existed before the listing started and
// was not removed during it is listed exactly once, whatever the commits
// do meanwhile. (A change made during the listing shows if its name's
// page is read after it.)
type listPager struct {
	fsys  *fsys
	root  bool      // hides the keys shadowed by .versions and .snapshots
	at    time.Time // lists the bucket as it was then (a .snapshots view); zero: as it is
	after string
	merge merger // its prefix is the directory's
	// unlisted, if set, returns the entries of the files created in the
	// directory that the store may not list yet: being written, or
	// closed with their change queued. It is asked once, before the
	// first page is read (see draftsIn).
	unlisted func() []dirent
	started  bool
	drafts   []dirent // what unlisted returned, by name; the pages take theirs
}

func (p *listPager) next(ctx context.Context) ([]dirent, bool, error) {
	prefix, after := p.merge.prefix, p.after
	if !p.started {
		p.started = true
		if p.unlisted != nil {
			p.drafts = p.unlisted()
			slices.SortFunc(p.drafts, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
		}
	}
	var heads map[string]queuedHead
	var read *pageRead
	if p.at.IsZero() {
		// Taken before the store is read: a change that commits in
		// between shows in both, the same.
		read = &pageRead{j: p.fsys.j, prefix: prefix}
		heads, read.seq = p.fsys.j.headsUnder(prefix)
	}
	res, err := p.fsys.list(ctx, p.at, meta.ListOptions{Prefix: prefix, Delimiter: "/", After: after, Attrs: true})
	if err != nil {
		return nil, false, p.fsys.errno("list "+prefix, err)
	}
	p.after = res.Next
	objs, cps := overlay(prefix, after, res, heads)
	files := p.draftsIn(res, objs, heads)
	for _, v := range objs {
		mode := p.fsys.posix(v, false).Mode & syscall.S_IFMT
		files = append(files, dirent{name: v.Key[len(prefix):], mode: mode, v: v, read: read})
	}
	slices.SortFunc(files, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	var out []dirent
	for len(files) > 0 || len(cps) > 0 {
		if len(cps) == 0 || len(files) > 0 && prefix+files[0].name < cps[0] {
			out = p.merge.key(out, files[0], prefix+files[0].name)
			files = files[1:]
		} else {
			out = p.merge.dir(out, cps[0])
			cps = cps[1:]
		}
	}
	if res.IsTruncated {
		return p.hide(out), false, nil
	}
	return p.hide(p.merge.end(out)), true, nil
}

// draftsIn takes from p.drafts the files whose names the page res holds
// (its last one takes the rest) and returns those it shows: the ones
// neither the store listed (objs, the page overlaid) nor a queued change
// answers for (heads, which the page's overlay applied). The files are
// taken as they were when the listing started, not as each page is read,
// so that a file closed before the listing is shown by its page even if
// its change is queued and commits after that page was read (an empty
// file is committed only at its release, after close(2) has returned:
// see draft.emptied); and a file that a change made during the listing
// touches is not shown a second time after its page. A file removed
// since the listing started may be shown.
func (p *listPager) draftsIn(res *meta.ListResult, objs []*meta.Version, heads map[string]queuedHead) []dirent {
	prefix := p.merge.prefix
	n := len(p.drafts)
	if res.IsTruncated {
		n, _ = slices.BinarySearchFunc(p.drafts, res.Next, func(e dirent, next string) int {
			if prefix+e.name > next {
				return 1
			}
			return -1
		})
	}
	page := p.drafts[:n:n] // the caller appends to what is left of it
	p.drafts = p.drafts[n:]
	return slices.DeleteFunc(page, func(e dirent) bool {
		key := prefix + e.name
		_, queued := heads[key]
		_, listed := slices.BinarySearchFunc(objs, key, func(v *meta.Version, k string) int { return strings.Compare(v.Key, k) })
		return queued || listed
	})
}

// overlay applies heads, the rows that the mount's queued changes put at
// the heads of keys under prefix, to a page of the store's listing that
// started after after: a key they delete (a rename's source among them)
// is dropped, a key they write shows their version, and the keys and
// subdirectories they create are added where they sort within the page.
// So a file renamed in the mount within the page's range is listed once,
// under its old name or its new one, however the commit and the listing
// interleave (one renamed from an earlier page's range to a later one's
// may be listed under both, as on a local disk). A change
// that empties a subdirectory is not applied: the listing shows the
// directory until it commits (a listing starts once the changes queued
// before it have committed; see dirNode.OpendirHandle).
func overlay(prefix, after string, res *meta.ListResult, heads map[string]queuedHead) ([]*meta.Version, []string) {
	if len(heads) == 0 {
		return res.Objects, res.CommonPrefixes
	}
	inPage := func(k string) bool { return k > after && (!res.IsTruncated || k <= res.Next) }
	var objs []*meta.Version
	stored := map[string]bool{}
	for _, v := range res.Objects {
		h, ok := heads[v.Key]
		switch {
		case !ok:
			objs = append(objs, v)
		case !h.gone():
			objs = append(objs, h.v)
		}
		stored[v.Key] = true
	}
	cps := slices.Clone(res.CommonPrefixes)
	for k, h := range heads {
		rest := k[len(prefix):]
		if rest == "" || h.gone() || stored[k] {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if cp := prefix + rest[:i+1]; inPage(cp) && !slices.Contains(cps, cp) {
				cps = append(cps, cp)
			}
		} else if inPage(k) {
			objs = append(objs, h.v)
		}
	}
	slices.SortFunc(objs, func(a, b *meta.Version) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(cps)
	return objs, cps
}

// hide drops the root entries named .versions and .snapshots: the mount
// shows its own there.
func (p *listPager) hide(ents []dirent) []dirent {
	if !p.root {
		return ents
	}
	return slices.DeleteFunc(ents, func(e dirent) bool { return virtualName(e.name) })
}

// A merger turns a listing with delimiter "/" (keys and common prefixes,
// in key order) into the entries of one directory. A key "a" and a
// common prefix "a/" name the same entry but do not come together ("a-b"
// sorts between them), so an entry made from a key is held back until the
// listing passes "a/", and dropped if "a/" turns up: the directory wins.
// Few entries are held at a time: only names that prefix the ones after
// them ("a" while "a-b", "a.c", … go by). Names that cannot be path
// components are skipped.
type merger struct {
	prefix string
	held   []dirent
}

// key adds the entry for key, whose name is e.name.
func (m *merger) key(out []dirent, e dirent, key string) []dirent {
	if !validName(e.name) {
		return out
	}
	out = m.pass(out, key)
	m.held = append(m.held, e)
	return out
}

// dir adds the entry for the common prefix cp.
func (m *merger) dir(out []dirent, cp string) []dirent {
	name := cp[len(m.prefix) : len(cp)-1]
	if !validName(name) {
		return out
	}
	out = m.pass(out, cp)
	m.held = slices.DeleteFunc(m.held, func(e dirent) bool { return e.name == name })
	return append(out, dirent{name: name, mode: syscall.S_IFDIR})
}

// pass releases the held entries whose directory would sort before key.
// Held in key order, "a" comes before "a-b", but "a-b/" sorts before "a/":
// every held entry is checked.
func (m *merger) pass(out []dirent, key string) []dirent {
	keep := m.held[:0]
	for _, e := range m.held {
		if m.prefix+e.name+"/" < key {
			out = append(out, e)
		} else {
			keep = append(keep, e)
		}
	}
	m.held = keep
	return out
}

// end releases every held entry: the listing is over.
func (m *merger) end(out []dirent) []dirent {
	out = append(out, m.held...)
	m.held = nil
	return out
}
