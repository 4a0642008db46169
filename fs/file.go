package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A fileNode is a regular file or a symlink of the live tree: one version
// of its key. When a lookup finds that another version has become the
// latest, the name gets a new inode (unless the file is being written
// here), so the kernel's view of the old one (its size, its cached pages)
// stays that of the old version for the processes that have it open.
//
// Handles opened for reading while nobody writes the file read the
// inode's version, whatever is committed later. Handles opened for
// writing, and any handle opened while one is, share the file's draft:
// they see each other's writes at once, as on a local disk, and the draft
// becomes one new version, whole, when any writing handle is closed or
// fsynced; the inode then stands for that version.
//
// The new version is queued in the journal, not committed yet, when
// close returns: until it commits, the inode answers for the file (its
// attributes, its bytes, the head a change of it starts from) and the
// store lags behind. fsync waits for the commit. Should a queued change of
// the file fail, the next close or fsync of the file fails (see
// failedCommit), and the inode shows the store's version again once
// nothing of it is queued.
type fileNode struct {
	node

	mu sync.Mutex
	// v is the version shown: the latest committed or queued by this
	// mount, its attributes only (light); nil until a new file's first
	// commit.
	v *meta.Version
	// draft is shared by the handles open while the file is written; nil
	// when there are none.
	draft *draft
	// cached is the version whose bytes the kernel's page cache holds, so
	// that reopening an unchanged file keeps its cache.
	cached meta.VersionID
	// reading counts the read handles open, by the version they read.
	// The kernel keeps one page cache per inode: a handle still reading
	// an older version fills it with that version's bytes, so while one
	// is open the cache is not trusted to hold the inode's version.
	reading map[meta.VersionID]int
	// untrusted says that the page cache may not hold the draft's bytes
	// when it commits: a handle of the draft was opened past the cache
	// (while handles of a version were open, see Open), and those
	// handles may have filled it with their version's since; or the
	// kernel wrote an append where the file no longer ends (see
	// misplaced).
	untrusted bool
	// grownFrom and grownTo say that each version of the file committed
	// here from grownFrom to grownTo, the last one committed, only added
	// bytes to the end of the one before: a read handle of any of them
	// may go on reading past its end from grownTo (see
	// readHandle.reader), as a reader of a local file sees appends.
	grownFrom, grownTo meta.VersionID
	// last is the file's last change queued in the journal.
	last *change
	// failed holds the error of a queued change of the file that failed,
	// until a close or fsync reports it; stale says that v may be a
	// version the store never got.
	failed atomic.Pointer[error]
	stale  atomic.Bool
	// detached says that an unlink or a rename over the file took its
	// name: the bridge forgets the name only once Unlink or Rename has
	// returned, and a release (sent after close(2) returns, and the only
	// commit of a file closed empty) may come in between.
	detached bool
}

// keyLocked returns the key the file is committed to: none once it is
// detached or the bridge has forgotten it.
func (n *fileNode) keyLocked() (string, bool) {
	if n.detached {
		return "", false
	}
	return n.path()
}

// detach takes the file's name away, after remove, which makes the
// store forget it, has succeeded; remove runs with the file locked, so no
// commit of it comes between.
func (n *fileNode) detach(remove func() syscall.Errno) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	if errno := remove(); errno != 0 {
		return errno
	}
	n.detached = true
	return 0
}

var (
	_ = (fusefs.NodeGetattrer)((*fileNode)(nil))
	_ = (fusefs.NodeSetattrer)((*fileNode)(nil))
	_ = (fusefs.NodeOpener)((*fileNode)(nil))
	_ = (fusefs.NodeReadlinker)((*fileNode)(nil))
)

// shows reports whether the inode can stand for v, the latest version a
// lookup or listing found: it is being written here, or shows v already,
// or a newer one (the listing was read before a commit that landed since).
// If so it fills out with its attributes.
func (n *fileNode) shows(ctx context.Context, v *meta.Version, out *fuse.Attr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refreshLocked(ctx)
	switch {
	case n.draft != nil:
		n.draft.attr(out)
	case n.v != nil && n.v.ID.Compare(v.ID) <= 0: // ids sort newest first
		n.fsys.fileAttr(n.v, out)
	default:
		return false
	}
	return true
}

// ownAttr fills out and reports true when the file answers for itself:
// it is being written, or a change of it is queued. Otherwise it does
// nothing.
func (n *fileNode) ownAttr(out *fuse.Attr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.draft != nil:
		n.draft.attr(out)
	case n.queuedLocked() && n.v != nil:
		n.fsys.fileAttr(n.v, out)
	default:
		return false
	}
	return true
}

// queuedLocked reports whether a change of the file is queued or being
// committed.
func (n *fileNode) queuedLocked() bool { return n.last != nil && !n.last.finished() }

// queueLocked prepares a write of the file and queues it.
func (n *fileNode) queueLocked(ctx context.Context, op string, write func(d *object.Service) error) syscall.Errno {
	c, err := n.fsys.queue(ctx, n.fail, write)
	if err != nil {
		return n.fsys.errno(op, err)
	}
	n.last = c
	return 0
}

// fail records that a queued change of the file failed. It runs on the
// journal's goroutine, which must not wait for the file's mutex: the
// mutex may be held by an fsync waiting for the journal.
func (n *fileNode) fail(err error) {
	n.failed.Store(&err)
	n.stale.Store(true)
}

// reportFailed answers the errno of a queued change of the file that has
// failed since the last report (see failedCommit), once.
func (n *fileNode) reportFailed() syscall.Errno {
	if err := n.failed.Swap(nil); err != nil {
		return failedCommit(*err)
	}
	return 0
}

// refreshLocked reads the file's version from the store again after a
// queued change of it failed, once nothing of it is queued any more.
func (n *fileNode) refreshLocked(ctx context.Context) {
	if n.queuedLocked() || !n.stale.Swap(false) {
		return
	}
	key, ok := n.keyLocked()
	if !ok {
		return
	}
	v, err := n.fsys.svc.Head(ctx, n.fsys.bucket, key, "")
	switch {
	case err == nil:
		n.v = light(v)
	case meta.IsNotFound(err), errors.Is(err, meta.ErrNoSuchBucket):
		n.v = nil
	default:
		n.stale.Store(true) // try again next time
	}
}

// headLocked returns the version a change of the file starts from: the
// one queued last, or else the key's latest, which may be newer than the
// inode's if another process wrote it. An unlinked file starts from the
// version it had.
//
// checked says that the change commits only while the version returned
// is still the key's latest (a rename, a change of attributes): the
// latest may then come from a page read ahead (see peek), which may miss
// another process's write of the last entry timeout, as the kernel's
// caches do; such a change then fails to commit rather than undo that
// write. Such a change shares the bytes of the version it starts from by
// naming it (meta.Version.ManifestOf), so a committed version, from a
// page or the store, is returned with its attributes only: the store
// reads its manifest as the change commits (a small file's bytes are
// then neither read here nor copied there). A version the journal holds
// is returned whole, so that it is never named: the journal knows a
// queued version only while it is its key's head. A change of the bytes
// is not checked: it asks the store for the whole version.
func (n *fileNode) headLocked(ctx context.Context, checked bool) (*meta.Version, syscall.Errno) {
	n.refreshLocked(ctx)
	key, ok := n.keyLocked()
	v := n.v
	switch {
	case ok && !n.queuedLocked():
		// The name may have been another file's, replaced by a rename
		// that is still queued.
		n.fsys.j.settle(key)
		if !checked {
			v, err := n.fsys.svc.Head(ctx, n.fsys.bucket, key, "")
			if err != nil {
				return nil, n.fsys.errno("stat "+key, err)
			}
			return v, 0
		}
		// A page that shows no file here may predate it: ask the store.
		st, ok := n.fsys.peek(dirOf(key), key)
		if !ok || st.File == nil {
			var err error
			if st, err = n.fsys.svc.Stat(ctx, n.fsys.bucket, key); err != nil {
				return nil, n.fsys.errno("stat "+key, err)
			}
		}
		if st.File == nil {
			return nil, syscall.ENOENT
		}
		return st.File, 0
	case v == nil:
		return nil, syscall.ENOENT
	}
	w, err := n.fsys.whole(ctx, v)
	if err != nil {
		return nil, n.fsys.errno("stat "+v.Key, err)
	}
	return w, 0
}

// Getattr reports the inode's attributes, whatever handle asks: the
// kernel keeps one set per inode, so a handle still reading an older
// version must not set them back to that version's.
func (n *fileNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refreshLocked(ctx)
	return n.attrLocked(&out.Attr)
}

// attrLocked fills out from the draft or the version. A file created here
// whose commit failed has neither any more.
func (n *fileNode) attrLocked(out *fuse.Attr) syscall.Errno {
	switch {
	case n.draft != nil:
		n.draft.attr(out)
	case n.v != nil:
		n.fsys.fileAttr(n.v, out)
	default:
		return syscall.ENOENT
	}
	return 0
}

// Setattr folds the change into the draft while the file is open for
// writing, so that it lands in the version the close commits. Otherwise a
// truncation queues a version at once (sharing the chunks it keeps), and
// chmod, chown and utimes a metadata-only one.
func (n *fileNode) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	_, truncate := in.GetSize()
	switch {
	case n.draft != nil:
		if err := n.draft.setattr(in); err != nil {
			return n.fsys.errno("setattr", err)
		}
		n.draft.attr(&out.Attr)
		return 0
	case truncate:
		v, errno := n.headLocked(ctx, false)
		if errno != 0 {
			return errno
		}
		d, err := n.fsys.newDraft(v, object.Attrs{})
		if err != nil {
			return n.fsys.errno("truncate", err)
		}
		defer d.close()
		if err := d.setattr(in); err != nil {
			return n.fsys.errno("truncate", err)
		}
		if errno := n.commitLocked(ctx, d); errno != 0 {
			return errno
		}
	case changesPOSIX(in):
		errno := n.updateLocked(ctx, "setattr", func(a *object.Attrs) error {
			setPOSIX(a.POSIX, in)
			return nil
		})
		if errno != 0 {
			return errno
		}
	}
	// else atime only: not stored
	return n.attrLocked(&out.Attr)
}

// Open opens the inode's version for reading, or its draft (started
// here if there is none) for writing or while it is written (see
// draft.settled for a draft whose writer has closed it).
//
// The kernel keeps one page cache per inode, filled by the reads of
// whichever handle misses it and written through by writes. A file
// rewritten in the mount keeps its inode, so while a handle of an older
// version is open (it opened before the rewrite), a handle opened later,
// of the newer version or of the file's draft, is opened with
// FOPEN_DIRECT_IO: its reads and writes go to the mount and never touch
// the cache, so neither handle reads the other's bytes from it. The
// older handle keeps the cache; once it is released the next open drops
// the cache and uses it again. A direct handle cannot be mapped shared
// (mmap fails with ENODEV); a private mapping reads through the shared
// cache, which the kernel drops first, so pages the older handle reads
// meanwhile show its bytes there.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refreshLocked(ctx)
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if !write && (n.draft == nil || n.draft.settled()) {
		if n.v == nil {
			return nil, 0, syscall.ENOENT
		}
		r, err := n.readerLocked(ctx)
		if err != nil {
			return nil, 0, n.fsys.errno("open", err)
		}
		var fl uint32
		switch {
		case !onlyReading(n.reading, n.v.ID):
			// A handle of an older version is open: its reads may
			// fill the page cache with its bytes at any time, so this
			// handle reads past the cache.
			fl = fuse.FOPEN_DIRECT_IO
		case n.v.ID == n.cached:
			fl = fuse.FOPEN_KEEP_CACHE
		default: // the kernel drops the cached pages at this open
			n.cached = n.v.ID
		}
		n.readLocked(n.v.ID)
		return &readHandle{fsys: n.fsys, n: n, v: n.v, r: r}, fl, 0
	}
	if n.draft == nil {
		v, errno := n.headLocked(ctx, false)
		if errno != 0 {
			return nil, 0, errno
		}
		d, err := n.fsys.newDraft(v, object.Attrs{})
		if err != nil {
			return nil, 0, n.fsys.errno("open", err)
		}
		n.draft, n.untrusted = d, false
	}
	d := n.draft
	if write && flags&syscall.O_TRUNC != 0 {
		if err := d.truncate(0); err != nil {
			if d.refs == 0 {
				n.draft = nil
				d.close()
			}
			return nil, 0, n.fsys.errno("open", err)
		}
	}
	d.refs++
	var fl uint32
	if len(n.reading) > 0 {
		// Handles of a version are open: the draft's bytes and theirs
		// must not meet in the page cache.
		fl = fuse.FOPEN_DIRECT_IO
		n.untrusted = true
	}
	return &draftHandle{n: n, d: d, write: write, append: write && flags&syscall.O_APPEND != 0}, fl, 0
}

// commitLocked queues d as the file's next version. An unlinked file has
// no key any more: its bytes go with it, as on a local disk.
func (n *fileNode) commitLocked(ctx context.Context, d *draft) syscall.Errno {
	key, ok := n.keyLocked()
	if !ok {
		return 0
	}
	grows := n.v != nil && d.extends(n.v.ID)
	v, c, err := d.commit(ctx, key, n.last, n.fail)
	if err != nil {
		n.fsys.log.Error("stratafs: commit failed", "bucket", n.fsys.bucket, "key", key, "err", err)
		return failedCommit(err)
	}
	if c != nil {
		n.last = c
	}
	if v != nil {
		switch {
		case grows && n.grownTo == n.v.ID:
			n.grownTo = v.ID
		case grows:
			n.grownFrom, n.grownTo = n.v.ID, v.ID
		default:
			n.grownFrom, n.grownTo = v.ID, v.ID
		}
		n.v, n.cached = light(v), v.ID
		if len(n.reading) > 0 || n.untrusted {
			n.cached = meta.VersionID{}
		}
	}
	return 0
}

// follow returns the file's latest version and a reader of it if a read
// handle of version old may go on to it: the file has only grown since
// old (see grownFrom). The handle is then counted as reading it.
func (n *fileNode) follow(ctx context.Context, old *meta.Version) (*meta.Version, *object.Reader) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.v == nil || n.v.ID == old.ID || n.grownTo != n.v.ID ||
		old.ID.Compare(n.grownFrom) > 0 || n.grownTo.Compare(old.ID) > 0 { // ids sort newest first
		return nil, nil
	}
	r, err := n.readerLocked(ctx)
	if err != nil {
		return nil, nil
	}
	n.unreadLocked(old.ID)
	n.readLocked(n.v.ID)
	return n.v, r
}

// readerLocked returns a reader of the inode's version, which holds its
// chunks against the collector until it is closed.
func (n *fileNode) readerLocked(ctx context.Context) (*object.Reader, error) {
	v, err := n.fsys.whole(ctx, n.v)
	if err != nil {
		return nil, err
	}
	return n.fsys.svc.ReaderAt(ctx, v)
}

// readLocked counts one more read handle of version id; unreadLocked one
// fewer.
func (n *fileNode) readLocked(id meta.VersionID) {
	if n.reading == nil {
		n.reading = map[meta.VersionID]int{}
	}
	n.reading[id]++
}

func (n *fileNode) unreadLocked(id meta.VersionID) {
	if n.reading[id]--; n.reading[id] <= 0 {
		delete(n.reading, id)
	}
}

// shortRead is told that a read handle's version ends at size, within
// the range the kernel asked it for. The kernel keeps one size per inode
// and takes a read that comes up short for the end of the file: if the
// file has grown since the handle opened, the kernel now believes it
// shorter than it is, and would show it so and append at that end (see
// misplaced). It is told to ask for the attributes and pages again.
func (n *fileNode) shortRead(size int64) {
	n.mu.Lock()
	grown := n.draft != nil && n.draft.length() > size || n.v != nil && n.v.Size > size
	n.mu.Unlock()
	if grown {
		n.recheck()
	}
}

// misplaced is told that the kernel sent an append to an offset where the
// file does not end (it believed the file shorter, see shortRead): the
// bytes went to the end, but the kernel's cached pages and size are
// wrong. It is told to ask for them again, and the draft's commit does
// not vouch for the cache.
func (n *fileNode) misplaced() {
	n.mu.Lock()
	n.untrusted, n.cached = true, meta.VersionID{}
	n.mu.Unlock()
	n.recheck()
}

// recheck makes the kernel drop the file's cached attributes and pages,
// from a goroutine of its own: the kernel may hold a page the request
// being answered reads or writes, and waits for the answer first.
func (n *fileNode) recheck() {
	go n.NotifyContent(0, 0)
}

// closed records that a read handle of version id was released. A handle
// of another version than the cached one may have filled the page cache
// with its bytes after the cached version was recorded, so the cache is
// no longer known to hold it.
func (n *fileNode) closed(id meta.VersionID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unreadLocked(id)
	if id != n.cached {
		n.cached = meta.VersionID{}
	}
}

// onlyReading reports whether every read handle open reads version id.
func onlyReading(reading map[meta.VersionID]int, id meta.VersionID) bool {
	return len(reading) == 0 || len(reading) == 1 && reading[id] > 0
}

// flush queues d's changes for a close, and reports a queued change of
// the file that failed since the last report.
func (n *fileNode) flush(ctx context.Context, d *draft) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	if errno := n.commitLocked(context.WithoutCancel(ctx), d); errno != 0 {
		return errno
	}
	d.markClosed()
	return n.reportFailed()
}

// fsync queues d's changes, if d is not nil, and waits until every change
// of the file queued so far is committed: durable, and seen by every
// reader of the store. It reports a change that failed.
func (n *fileNode) fsync(ctx context.Context, d *draft) syscall.Errno {
	n.mu.Lock()
	if d != nil {
		if errno := n.commitLocked(context.WithoutCancel(ctx), d); errno != 0 {
			n.mu.Unlock()
			return errno
		}
	}
	last := n.last
	n.mu.Unlock()
	if last != nil {
		// A failure is recorded by fail; a change still queued is
		// refused by the store so far.
		if err := n.fsys.j.wait(last); err != nil && !last.finished() {
			return failedCommit(err)
		}
	}
	return n.reportFailed()
}

// release drops a handle's hold on d. The last one queues what is left
// (writes through a shared mapping may arrive after the close) and
// discards the draft; a failure can then only be logged: the kernel does
// not wait for a release.
func (n *fileNode) release(ctx context.Context, d *draft) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d.refs--; d.refs > 0 {
		return
	}
	n.draft = nil
	n.commitLocked(context.WithoutCancel(ctx), d)
	if d.data {
		// Not committed: the kernel's cached pages hold bytes no
		// version has.
		n.cached = meta.VersionID{}
	}
	if key, ok := n.keyLocked(); ok && n.v == nil {
		// A new file that never made it: the kernel must forget the
		// name it was shown.
		n.fsys.invalid(key)
	}
	if err := d.close(); err != nil {
		n.fsys.log.Error("stratafs: closing a staged file", "err", err)
	}
}

// rename moves the file's key from src to dst without copying bytes.
// Uncommitted writes are queued first, so they move with it.
func (n *fileNode) rename(ctx context.Context, src, dst string) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.draft != nil {
		if errno := n.commitLocked(ctx, n.draft); errno != 0 {
			return errno
		}
	}
	head, errno := n.headLocked(ctx, true)
	if errno != 0 {
		return errno
	}
	var v *meta.Version
	errno = n.queueLocked(ctx, "rename "+src, func(d *object.Service) (err error) {
		v, err = d.RenameVersion(ctx, n.fsys.bucket, head, dst, "")
		return err
	})
	if errno == 0 {
		n.showLocked(head, v)
	}
	return errno
}

// showLocked makes v, which shares head's bytes, the version shown,
// keeping the kernel's cached pages if they are head's.
func (n *fileNode) showLocked(head, v *meta.Version) {
	if n.cached == head.ID {
		n.cached = v.ID
	}
	n.v = light(v)
}

// updateLocked queues a metadata-only new version of the file with fn
// applied to its attributes; a key that had no POSIX attributes gets the
// defaults first, so that a chmod keeps the owner it showed. While the
// file's last version waits in the journal, the change joins it instead
// (see fsys.update). A file unlinked while open has no key to write: as
// on a local disk, only the inode changes (fchmod, futimens).
func (n *fileNode) updateLocked(ctx context.Context, op string, fn func(*object.Attrs) error) syscall.Errno {
	if _, ok := n.keyLocked(); !ok && n.v != nil {
		a := n.fsys.attrsOf(n.v, false)
		if err := fn(&a); err != nil {
			return n.fsys.errno(op+" "+n.v.Key, err)
		}
		v := *n.v
		a.Apply(&v)
		n.v = &v
		return 0
	}
	head, errno := n.headLocked(ctx, true)
	if errno != 0 {
		return errno
	}
	v, c, err := n.fsys.update(ctx, n.last, head, false, n.fail, fn)
	if err != nil {
		return n.fsys.errno(op+" "+head.Key, err)
	}
	if c != nil {
		n.last = c
	}
	n.showLocked(head, v)
	return 0
}

// update makes a metadata-only new version of head, the latest version of
// a file or directory marker, with fn applied to its attributes. If last,
// the change that wrote head, still waits in the journal, the new
// attributes are folded into head's version, which never commits as it
// was: a file created and then given its mode and times (tar, cp -a,
// rsync, a symlink's owner) makes one version, as if it had been written
// with them. Otherwise the new version is queued, and returned with its
// change; failed is as for queue. If fn changes nothing, head is returned
// as it is, with no change.
func (f *fsys) update(ctx context.Context, last *change, head *meta.Version, dir bool, failed func(error), fn func(*object.Attrs) error) (*meta.Version, *change, error) {
	a := f.attrsOf(head, dir)
	if err := fn(&a); err != nil {
		return nil, nil, err
	}
	if sameAttrs(a, f.attrsOf(head, dir)) {
		return head, nil, nil
	}
	var v *meta.Version
	folded, err := f.j.amend(last, func(p *object.Pending) (err error) {
		v, err = p.Amend(a)
		return err
	})
	if folded && err == nil {
		return v, nil, nil
	}
	c, err := f.queue(ctx, failed, func(d *object.Service) (err error) {
		v, err = d.ReplaceAttrs(ctx, f.bucket, head, a)
		return err
	})
	return v, c, err
}

// unlisted reports whether the store may not list the file yet: it was
// created in the mount and is being written, with no version yet, or its
// version still waits in the journal (a file closed a moment ago). A name
// the store lists as well is shown once.
func (n *fileNode) unlisted() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.v == nil && n.draft != nil || n.queuedLocked()
}

func (n *fileNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.v == nil || n.v.POSIX == nil {
		return nil, syscall.EINVAL
	}
	return []byte(n.v.POSIX.Symlink), 0
}

func (n *fileNode) userMeta(ctx context.Context) (map[string]string, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.draft != nil:
		return n.draft.userMeta(), 0
	case n.v == nil:
		return nil, syscall.ENOENT
	}
	return n.v.UserMeta, 0
}

func (n *fileNode) updateUserMeta(ctx context.Context, fn func(map[string]string) error) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.draft != nil {
		m := cloneMeta(n.draft.userMeta())
		if err := fn(m); err != nil {
			return n.fsys.errno("setxattr", err)
		}
		n.draft.setUserMeta(m)
		return 0
	}
	return n.updateLocked(ctx, "setxattr", func(a *object.Attrs) error {
		a.UserMeta = cloneMeta(a.UserMeta)
		return fn(a.UserMeta)
	})
}

// A readHandle reads one version, whatever is committed after it opened,
// save appends made in the mount (see reader).
type readHandle struct {
	fsys *fsys
	n    *fileNode // the file of the live tree read; nil for .versions

	mu   sync.Mutex
	v    *meta.Version
	r    *object.Reader   // holds v's chunks until Release
	past []*object.Reader // of the versions read before v, until Release
	// files holds the chunk files reads within one chunk are spliced
	// from.
	files chunkFiles
}

var (
	_ = (fusefs.FileReader)((*readHandle)(nil))
	_ = (fusefs.FileFsyncer)((*readHandle)(nil))
	_ = (fusefs.FileReleaser)((*readHandle)(nil))
)

// Read answers with the chunk file when the bytes lie in one local chunk
// (spliced to the kernel, no copy here), else copies them.
func (h *readHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	v, r := h.reader(ctx, off+int64(len(dest)))
	if off < r.Size() {
		if res := h.files.read(r.ReaderAt, off, len(dest)); res != nil {
			return res, 0
		}
	}
	n, err := r.ReadAt(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, h.fsys.errno(fmt.Sprintf("read %s@%s", v.Key, v.WireID()), err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// reader returns the version a read that ends at end reads, and its
// reader: the handle's, unless that version ends before end and the file
// has only grown since in the mount (see fileNode.grownFrom). The handle
// then reads the newest version from on: its bytes start with the ones
// the handle read, so 'tail -f' follows a log that 'echo >> log'
// appends to. A file rewritten any other way keeps its older handles on
// their version.
func (h *readHandle) reader(ctx context.Context, end int64) (*meta.Version, *object.Reader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil || end <= h.r.Size() {
		return h.v, h.r
	}
	if v, r := h.n.follow(ctx, h.v); r != nil {
		h.past = append(h.past, h.r) // reads in flight may still use it
		h.v, h.r = v, r
	} else {
		h.n.shortRead(h.r.Size())
	}
	return h.v, h.r
}

// Release closes the chunk files the handle opened and lets the
// collector have the versions' chunks.
func (h *readHandle) Release(ctx context.Context) syscall.Errno {
	h.files.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range append(h.past, h.r) {
		r.Close()
	}
	if h.n != nil {
		h.n.closed(h.v.ID)
	}
	return 0
}

// Fsync waits until what was written to the file is durable.
func (h *readHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.n == nil {
		return 0
	}
	return h.n.fsync(ctx, nil)
}

// A draftHandle reads and writes a file's draft.
type draftHandle struct {
	n     *fileNode
	d     *draft
	write bool
	// append says that every write goes to the end of the file
	// (O_APPEND), wherever the kernel thinks that is.
	append bool
}

var (
	_ = (fusefs.FileReader)((*draftHandle)(nil))
	_ = (fusefs.FileWriter)((*draftHandle)(nil))
	_ = (fusefs.FileFlusher)((*draftHandle)(nil))
	_ = (fusefs.FileFsyncer)((*draftHandle)(nil))
	_ = (fusefs.FileReleaser)((*draftHandle)(nil))
)

func (h *draftHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.d.readAt(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, h.n.fsys.errno("read", err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *draftHandle) Write(ctx context.Context, p []byte, off int64) (uint32, syscall.Errno) {
	at := off
	if h.append {
		at = atEnd
	}
	at, err := h.d.writeAt(p, at, h.n.path)
	if err != nil {
		return 0, h.n.fsys.errno("write", err)
	}
	if at != off {
		h.n.misplaced()
	}
	return uint32(len(p)), 0
}

// Flush runs on every close(2): closing a handle that may have written
// queues the file's new version, and fails if that cannot be prepared or
// if a change of the file queued before has failed. A file emptied and
// not written yet is left to the release (see draft.emptied).
func (h *draftHandle) Flush(ctx context.Context) syscall.Errno {
	if !h.write || h.d.emptied() {
		return 0
	}
	return h.n.flush(ctx, h.d)
}

// Fsync commits the file: when it returns, the version is durable.
func (h *draftHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if !h.write {
		return h.n.fsync(ctx, nil)
	}
	return h.n.fsync(ctx, h.d)
}

func (h *draftHandle) Release(ctx context.Context) syscall.Errno {
	h.n.release(ctx, h.d)
	return 0
}
