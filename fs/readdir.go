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
}

// A pager lists a directory one page of the store's listing at a time;
// done is set with the last page.
type pager interface {
	next(ctx context.Context) (ents []dirent, done bool, err error)
}

// A dirHandle streams a listing to the kernel as it reads it: it holds one
// page of the store's listing at most, so `ls` of a huge directory starts
// at once and memory stays flat. Seeking back (rewinddir) starts the
// listing over. go-fuse serializes the calls on one handle.
type dirHandle struct {
	list   func() pager
	lookup func(ctx context.Context, e dirent, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno)
	sync   func() // waits until the mount's changes are committed

	pg   pager
	buf  []dirent
	done bool
	off  uint64 // entries handed out, "." and ".." included
	last dirent
}

var (
	_ = (fusefs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fusefs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fusefs.FileLookuper)((*dirHandle)(nil))
	_ = (fusefs.FileFsyncdirer)((*dirHandle)(nil))
)

func newDirHandle(list func() pager, lookup func(context.Context, dirent, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno), sync func()) *dirHandle {
	h := &dirHandle{list: list, lookup: lookup, sync: sync}
	h.restart()
	return h
}

func (h *dirHandle) restart() {
	h.pg, h.done, h.off = h.list(), false, 0
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
	return &fuse.DirEntry{Name: h.last.name, Mode: h.last.mode, Off: h.off}, 0
}

// Seekdir starts over and skips to the off'th entry: listings have no
// stable positions to seek to, since entries come and go between reads.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == h.off {
		return 0
	}
	h.restart()
	for h.off < off {
		de, errno := h.Readdirent(ctx)
		if errno != 0 || de == nil {
			return errno
		}
	}
	return 0
}

// Lookup answers READDIRPLUS for the entry just read.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if name != h.last.name {
		return nil, syscall.ENOENT
	}
	return h.lookup(ctx, h.last, out)
}

// Fsyncdir waits until every change made in the mount before it is
// committed, and so durable: the directory's entries among them.
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	h.sync()
	return 0
}

// listPager lists the live keys of one directory: object.List with
// delimiter "/", one page per call, overlaid with the mount's changes
// still queued in the journal (see overlay); then the files created in
// the mount and being written, which have no key yet.
type listPager struct {
	fsys  *fsys
	root  bool      // hides the keys shadowed by .versions and .snapshots
	at    time.Time // lists the bucket as it was then (a .snapshots view); zero: as it is
	after string
	merge merger // its prefix is the directory's
	// unlisted, if set, returns the entries of the files created in the
	// directory and not committed yet: asked at the end of the listing,
	// about the files there are then.
	unlisted func() []dirent
}

func (p *listPager) next(ctx context.Context) ([]dirent, bool, error) {
	prefix, after := p.merge.prefix, p.after
	var heads map[string]queuedHead
	if p.at.IsZero() {
		// Taken before the store is read: a change that commits in
		// between shows in both, the same.
		heads = p.fsys.j.headsUnder(prefix)
	}
	res, err := p.fsys.list(ctx, p.at, meta.ListOptions{Prefix: prefix, Delimiter: "/", After: after})
	if err != nil {
		return nil, false, p.fsys.errno("list "+prefix, err)
	}
	p.after = res.Next
	var out []dirent
	objs, cps := overlay(prefix, after, res, heads)
	for len(objs) > 0 || len(cps) > 0 {
		if len(cps) == 0 || len(objs) > 0 && objs[0].Key < cps[0] {
			v := objs[0]
			objs = objs[1:]
			mode := p.fsys.posix(v, false).Mode & syscall.S_IFMT
			out = p.merge.key(out, dirent{name: v.Key[len(prefix):], mode: mode, v: v}, v.Key)
		} else {
			out = p.merge.dir(out, cps[0])
			cps = cps[1:]
		}
	}
	if res.IsTruncated {
		return p.hide(out), false, nil
	}
	out = p.merge.end(out)
	return p.hide(append(out, p.writing(out, heads)...)), true, nil
}

// writing returns the files being written in the mount that the listing
// has not shown: out is its last page, which started after after, heads
// what the journal held when it was read. The files are those there are
// at the end, with their names then; one whose change was queued before
// the page was read was left to the overlay (its page showed it, or it
// came since), and one a rename queued since made did not exist when the
// page was read (its old name may be listed).
func (p *listPager) writing(out []dirent, heads map[string]queuedHead) []dirent {
	if p.unlisted == nil {
		return nil
	}
	return slices.DeleteFunc(p.unlisted(), func(u dirent) bool {
		if slices.ContainsFunc(out, func(e dirent) bool { return e.name == u.name }) {
			return true
		}
		key := p.merge.prefix + u.name
		h, ok := p.fsys.j.head(key)
		return ok && (heads[key].c == h.c || len(h.c.keys) > 1)
	})
}

// overlay applies heads, the rows that the mount's queued changes put at
// the heads of keys under prefix, to a page of the store's listing that
// started after after: a key they delete (a rename's source among them)
// is dropped, a key they write shows their version, and the keys and
// subdirectories they create are added where they sort within the page.
// So a file renamed in the mount is listed once, under its old name or
// its new one, however the commit and the listing interleave. A change
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
