package fs

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A dirNode is a directory of the live tree: the root, or a prefix made a
// directory by its marker or by the keys under it.
type dirNode struct {
	node

	mu     sync.Mutex
	marker *meta.Version // the last known marker; nil when there is none
	// last is the last change of the marker queued in the journal.
	last *change
	// read is when the marker was last read from the store (zero: it
	// must be read again).
	read time.Time
}

var (
	_ = (fusefs.NodeGetattrer)((*dirNode)(nil))
	_ = (fusefs.NodeSetattrer)((*dirNode)(nil))
	_ = (fusefs.NodeLookuper)((*dirNode)(nil))
	_ = (fusefs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (fusefs.NodeCreater)((*dirNode)(nil))
	_ = (fusefs.NodeMkdirer)((*dirNode)(nil))
	_ = (fusefs.NodeSymlinker)((*dirNode)(nil))
	_ = (fusefs.NodeUnlinker)((*dirNode)(nil))
	_ = (fusefs.NodeRmdirer)((*dirNode)(nil))
	_ = (fusefs.NodeRenamer)((*dirNode)(nil))
	_ = (fusefs.NodeLinker)((*dirNode)(nil))
)

// prefix returns the prefix of the keys in the directory: "" for the root,
// else its path and "/".
func (n *dirNode) prefix() (string, syscall.Errno) {
	p, ok := n.path()
	switch {
	case !ok:
		return "", syscall.ENOENT
	case p == "":
		return "", 0
	}
	return p + "/", 0
}

// childKey returns the key of the entry name in the directory. The
// kernel leaves NAME_MAX to the file system: a longer name could be
// created but never listed.
func (n *dirNode) childKey(name string) (string, syscall.Errno) {
	p, errno := n.prefix()
	switch {
	case errno != 0:
		return "", errno
	case len(name) > maxName || len(p)+len(name) > meta.MaxKeyLen:
		return "", syscall.ENAMETOOLONG
	}
	return p + name, 0
}

// virtual reports whether name is the root's .versions or .snapshots,
// which no operation of the live tree may touch.
func (n *dirNode) virtual(name string) bool { return n.IsRoot() && virtualName(name) }

// attr fills out with the directory's last known attributes.
func (n *dirNode) attr(out *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fsys.dirAttr(n.marker, out)
}

// known records marker, just read from the store, as the directory's and
// fills out with its attributes.
func (n *dirNode) known(marker *meta.Version, out *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.marker, n.read = marker, time.Now()
	n.fsys.dirAttr(marker, out)
}

// fresh reports whether the marker was read from the store within the
// attribute timeout.
func (n *dirNode) fresh() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Since(n.read) < n.fsys.opts.AttrTimeout
}

// forget makes the next Getattr read the marker from the store.
func (n *dirNode) forget() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.read = time.Time{}
}

// Getattr reads the marker again, unless a change of it is queued (the
// node knows it better than the store) or it was read within the
// attribute timeout: the kernel drops a directory's attributes whenever
// an entry in it changes, and asks again on the next path walk through
// it, but entries do not change the marker, and a change of the marker
// made by another process may show that late anyway (one made in this
// process invalidates at once). A directory whose keys are all gone keeps
// its last attributes: it may be some process's working directory.
func (n *dirNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	p, ok := n.path()
	if ok && p != "" && !n.fsys.j.pendingKey(p+"/") && !n.fresh() {
		st, err := n.fsys.svc.Stat(ctx, n.fsys.bucket, p)
		if err != nil {
			return n.fsys.errno("stat "+p, err)
		}
		if st.Dir {
			n.known(st.Marker, &out.Attr)
			return 0
		}
	}
	n.attr(&out.Attr)
	return 0
}

// Setattr stores chmod, chown and utimes in the marker, creating one for
// a directory that has none. The root has no key to keep them in.
func (n *dirNode) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if !changesPOSIX(in) {
		return n.Getattr(ctx, fh, out)
	}
	errno := n.updateMarker(ctx, "setattr", func(a *object.Attrs) error {
		setPOSIX(a.POSIX, in)
		return nil
	})
	if errno != 0 {
		return errno
	}
	n.attr(&out.Attr)
	return 0
}

// updateMarker queues a new version of the directory's marker with fn
// applied to its attributes, creating the marker if there is none; no
// version if fn changes nothing.
func (n *dirNode) updateMarker(ctx context.Context, op string, fn func(*object.Attrs) error) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	key, errno := n.prefix()
	switch {
	case errno != 0:
		return errno
	case key == "":
		return syscall.EPERM
	}
	head, errno := n.markerHead(ctx, key)
	if errno != 0 {
		return errno
	}
	var v *meta.Version
	var c *change
	var err error
	if head == nil {
		a := n.fsys.attrsOf(nil, true)
		if err := fn(&a); err != nil {
			return n.fsys.errno(op+" "+key, err)
		}
		if sameAttrs(a, n.fsys.attrsOf(nil, true)) {
			return 0 // what the directory shows without one
		}
		v, c, err = n.fsys.create(ctx, key, a, nil)
	} else {
		n.mu.Lock()
		last := n.last
		n.mu.Unlock()
		v, c, err = n.fsys.update(ctx, last, head, true, nil, fn)
	}
	if err != nil {
		return n.fsys.errno(op+" "+key, err)
	}
	n.queued(v, c)
	return 0
}

// queued records v, a new version of the marker, and c, the change that
// writes it (nil when v was folded into the change before).
func (n *dirNode) queued(v *meta.Version, c *change) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.marker = v
	if c != nil {
		n.last = c
	}
}

// markerHead returns the directory's marker, key: the node's own while a
// change of it is queued, else the store's; nil when there is none.
func (n *dirNode) markerHead(ctx context.Context, key string) (*meta.Version, syscall.Errno) {
	if n.fsys.j.pendingKey(key) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.marker, 0
	}
	v, err := n.fsys.svc.Head(ctx, n.fsys.bucket, key, "")
	switch {
	case meta.IsNotFound(err):
		return nil, 0
	case err != nil:
		return nil, n.fsys.errno("stat "+key, err)
	}
	return v, 0
}

func (n *dirNode) userMeta(ctx context.Context) (map[string]string, syscall.Errno) {
	key, errno := n.prefix()
	if errno != 0 || key == "" {
		return nil, errno
	}
	v, errno := n.markerHead(ctx, key)
	if v == nil {
		return nil, errno
	}
	return v.UserMeta, 0
}

func (n *dirNode) updateUserMeta(ctx context.Context, fn func(map[string]string) error) syscall.Errno {
	return n.updateMarker(ctx, "setxattr", func(a *object.Attrs) error {
		a.UserMeta = cloneMeta(a.UserMeta)
		return fn(a.UserMeta)
	})
}

func (n *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if n.virtual(name) {
		if name == snapshotsName {
			return n.snapshotsRoot(ctx, out), 0
		}
		return n.versionsRoot(ctx, out), 0
	}
	key, errno := n.childKey(name)
	if errno != 0 {
		return nil, errno
	}
	// A file being written, or whose last change is queued, may not be
	// in the store yet, and is newer than the store anyway; so is a
	// directory with changes queued under it.
	if ch := n.GetChild(name); ch != nil {
		switch c := ch.Operations().(type) {
		case *fileNode:
			if c.ownAttr(&out.Attr) {
				return ch, 0
			}
		case *dirNode:
			if n.fsys.j.pending(key + "/") {
				c.attr(&out.Attr)
				return ch, 0
			}
		}
	}
	n.fsys.j.settle(key, key+"/")
	st, err := n.fsys.stat(ctx, strings.TrimSuffix(key, name), key)
	if err != nil {
		return nil, n.fsys.errno("lookup "+key, err)
	}
	switch {
	case st.Dir:
		return n.dirChild(ctx, name, st.Marker, out), 0
	case st.File != nil:
		return n.fileChild(ctx, name, st.File, out), 0
	}
	return nil, syscall.ENOENT
}

// fileChild returns the inode of the file or symlink name, whose latest
// version is v: the inode known under that name if it shows v or is being
// written (its draft and handles stay with the name), else a new one.
func (n *dirNode) fileChild(ctx context.Context, name string, v *meta.Version, out *fuse.EntryOut) *fusefs.Inode {
	mode := n.fsys.posix(v, false).Mode & syscall.S_IFMT
	if ch := n.GetChild(name); ch != nil && ch.Mode() == mode {
		if f, ok := ch.Operations().(*fileNode); ok && f.shows(ctx, v, &out.Attr) {
			return ch
		}
	}
	n.fsys.fileAttr(v, &out.Attr)
	return n.NewInode(ctx, &fileNode{node: node{fsys: n.fsys}, v: light(v)}, fusefs.StableAttr{Mode: mode})
}

// dirChild returns the inode of the subdirectory name.
func (n *dirNode) dirChild(ctx context.Context, name string, marker *meta.Version, out *fuse.EntryOut) *fusefs.Inode {
	if ch := n.GetChild(name); ch != nil {
		if d, ok := ch.Operations().(*dirNode); ok {
			d.known(marker, &out.Attr)
			return ch
		}
	}
	d := &dirNode{node: node{fsys: n.fsys}}
	d.known(marker, &out.Attr)
	return n.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR})
}

func (n *dirNode) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	p, errno := n.prefix()
	if errno != 0 {
		return nil, 0, errno
	}
	list := func() pager {
		n.fsys.j.settle(p)
		return &listPager{fsys: n.fsys, root: n.IsRoot(), merge: merger{prefix: p}, unlisted: n.unlisted}
	}
	h := newDirHandle(list, n.direntLookup, n.fsys.j.sync)
	h.dir = n.EmbeddedInode() // lets the listing see that ls -l looks its bare entries up (see maxPlus)
	return h, 0, 0
}

// direntLookup answers READDIRPLUS for an entry just listed: a file from
// the version the listing returned, without asking the store again; a
// directory by a lookup, which reads its marker.
func (n *dirNode) direntLookup(ctx context.Context, e dirent, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if e.v != nil {
		return n.fileChild(ctx, e.name, e.v, out), 0
	}
	return n.Lookup(ctx, e.name, out)
}

// Create starts a new file as a draft: nothing is written to the store
// until the file is closed or fsynced, so creating and writing a file
// makes exactly one version.
func (n *dirNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	key, errno := n.childKey(name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	st, err := n.fsys.statChange(ctx, key)
	switch {
	case err != nil:
		return nil, nil, 0, n.fsys.errno("create "+key, err)
	case st.Dir:
		return nil, nil, 0, syscall.EISDIR
	case st.File != nil && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case st.File != nil: // the kernel had not seen it yet
		ch := n.fileChild(ctx, name, st.File, out)
		fh, fl, errno := ch.Operations().(*fileNode).Open(ctx, flags)
		return ch, fh, fl, errno
	}
	p := n.fsys.newPOSIX(ctx, syscall.S_IFREG|mode&0o7777)
	d, err := n.fsys.newDraft(nil, object.Attrs{POSIX: &p})
	if err != nil {
		return nil, nil, 0, n.fsys.errno("create "+key, err)
	}
	d.refs = 1
	f := &fileNode{node: node{fsys: n.fsys}, draft: d}
	d.attr(&out.Attr)
	return n.NewInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFREG}), &draftHandle{n: f, d: d, write: true}, 0, 0
}

// create queues a zero-byte key that must not exist yet: a directory
// marker or a symlink. failed is as for queue.
func (f *fsys) create(ctx context.Context, key string, a object.Attrs, failed func(error)) (*meta.Version, *change, error) {
	var v *meta.Version
	c, err := f.queue(ctx, failed, func(d *object.Service) (err error) {
		v, err = d.Put(ctx, f.bucket, key, strings.NewReader(""), object.PutOptions{Attrs: a, Check: absent})
		return err
	})
	return v, c, err
}

// exists reports whether key names a file or a directory.
func (n *dirNode) exists(ctx context.Context, key string) (bool, syscall.Errno) {
	st, err := n.fsys.statChange(ctx, key)
	if err != nil {
		return false, n.fsys.errno("stat "+key, err)
	}
	return st.File != nil || st.Dir, 0
}

// Mkdir writes the directory's marker, carrying its mode and owner.
func (n *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx)
	key, errno := n.childKey(name)
	if errno != 0 {
		return nil, errno
	}
	if ok, errno := n.exists(ctx, key); errno != 0 || ok {
		return nil, cmp.Or(errno, syscall.EEXIST)
	}
	p := n.fsys.newPOSIX(ctx, syscall.S_IFDIR|mode&0o7777)
	v, c, err := n.fsys.create(ctx, key+"/", object.Attrs{POSIX: &p}, nil)
	if err != nil {
		return nil, n.fsys.errno("mkdir "+key, err)
	}
	ch := n.dirChild(ctx, name, v, out)
	ch.Operations().(*dirNode).queued(v, c)
	return ch, 0
}

// Symlink writes a zero-byte key whose POSIX attributes hold the target.
func (n *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx)
	key, errno := n.childKey(name)
	if errno != 0 {
		return nil, errno
	}
	if ok, errno := n.exists(ctx, key); errno != 0 || ok {
		return nil, cmp.Or(errno, syscall.EEXIST)
	}
	p := n.fsys.newPOSIX(ctx, syscall.S_IFLNK|0o777)
	p.Symlink = target
	f := &fileNode{node: node{fsys: n.fsys}}
	v, c, err := n.fsys.create(ctx, key, object.Attrs{POSIX: &p}, f.fail)
	if err != nil {
		return nil, n.fsys.errno("symlink "+key, err)
	}
	f.v, f.last = v, c
	n.fsys.fileAttr(v, &out.Attr)
	return n.NewInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFLNK}), 0
}

// Unlink queues the DELETE of the key: a delete marker in a versioned
// bucket, so the file stays readable under .versions.
func (n *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	key, errno := n.childKey(name)
	if errno != 0 {
		return errno
	}
	del := func() syscall.Errno { return n.delete(ctx, "unlink", key) }
	if ch := n.GetChild(name); ch != nil {
		if f, ok := ch.Operations().(*fileNode); ok {
			return f.detach(func() syscall.Errno {
				if f.v == nil {
					return 0 // created here and never committed: nothing to delete
				}
				return del()
			})
		}
	}
	return del()
}

// delete queues the DELETE of key.
func (n *dirNode) delete(ctx context.Context, op, key string) syscall.Errno {
	_, err := n.fsys.queue(ctx, nil, func(d *object.Service) error {
		_, err := d.Delete(ctx, n.fsys.bucket, key, object.DeleteOptions{})
		return err
	})
	if err != nil {
		return n.fsys.errno(op+" "+key, err)
	}
	return 0
}

// Rmdir queues the DELETE of the directory's marker, refusing while any
// key lies under it. A directory that has neither is already gone from
// the store: only the kernel still knew it.
func (n *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	if n.virtual(name) {
		return syscall.EROFS
	}
	key, errno := n.childKey(name)
	if errno != 0 {
		return errno
	}
	prefix := key + "/"
	n.fsys.j.settle(prefix)
	empty, marker, errno := n.emptyDir(ctx, prefix)
	switch {
	case errno != 0:
		return errno
	case !empty || n.writingUnder(name):
		return syscall.ENOTEMPTY
	case !marker:
		return 0
	}
	return n.delete(ctx, "rmdir", prefix)
}

// emptyDir reports whether no key but the marker lies under prefix, and
// whether the marker exists.
func (n *dirNode) emptyDir(ctx context.Context, prefix string) (empty, marker bool, errno syscall.Errno) {
	res, err := n.fsys.svc.List(ctx, n.fsys.bucket, meta.ListOptions{Prefix: prefix, MaxKeys: 2, Attrs: true})
	if err != nil {
		return false, false, n.fsys.errno("list "+prefix, err)
	}
	for _, v := range res.Objects {
		if v.Key != prefix {
			return false, marker, 0
		}
		marker = true
	}
	return true, marker, 0
}

// writingUnder reports whether the subdirectory name holds a file created
// in the mount and not committed yet.
func (n *dirNode) writingUnder(name string) bool {
	if ch := n.GetChild(name); ch != nil {
		d, ok := ch.Operations().(*dirNode)
		return ok && len(d.unlisted()) > 0
	}
	return false
}

// unlisted returns the entries of the files created in the directory and
// being written, which the store does not list yet.
func (n *dirNode) unlisted() []dirent {
	var ents []dirent
	for name, ch := range n.Children() {
		if f, ok := ch.Operations().(*fileNode); ok && f.unlisted() {
			ents = append(ents, dirent{name: name, mode: syscall.S_IFREG})
		}
	}
	return ents
}

// Rename queues the move of a file (no bytes copied; an existing
// destination is replaced) or of a directory with object.RenamePrefix:
// every key under it in one commit, up to MaxRenameKeys, past which it
// fails with EXDEV so that mv copies instead. RENAME_EXCHANGE is not
// supported.
func (n *dirNode) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = context.WithoutCancel(ctx)
	to, ok := newParent.(*dirNode)
	switch {
	case flags&^unix.RENAME_NOREPLACE != 0:
		return syscall.EINVAL
	case !ok || n.virtual(name) || to.virtual(newName):
		return syscall.EROFS
	}
	src, errno := n.childKey(name)
	if errno != 0 {
		return errno
	}
	dst, errno := to.childKey(newName)
	if errno != 0 {
		return errno
	}
	ch := n.GetChild(name)
	if ch == nil {
		return syscall.ENOENT
	}
	at, err := n.fsys.statChange(ctx, dst)
	switch {
	case err != nil:
		return n.fsys.errno("rename to "+dst, err)
	case flags&unix.RENAME_NOREPLACE != 0 && (at.File != nil || at.Dir):
		return syscall.EEXIST
	case !ch.IsDir() && at.Dir:
		return syscall.EISDIR
	case !ch.IsDir():
		rename := func() syscall.Errno { return ch.Operations().(*fileNode).rename(ctx, src, dst) }
		if old := to.GetChild(newName); old != nil && old != ch {
			if f, ok := old.Operations().(*fileNode); ok {
				return f.detach(rename)
			}
		}
		return rename()
	case at.File != nil && !at.Dir:
		return syscall.ENOTDIR
	case at.Dir:
		if empty, _, errno := to.emptyDir(ctx, dst+"/"); errno != 0 || !empty {
			return cmp.Or(errno, syscall.ENOTEMPTY)
		}
	}
	n.fsys.j.settle(src + "/")
	_, err = n.fsys.queue(ctx, nil, func(d *object.Service) error {
		_, err := d.RenamePrefix(ctx, n.fsys.bucket, src+"/", dst+"/", "", n.fsys.maxRenameKeys())
		return err
	})
	if err != nil && !errors.Is(err, meta.ErrNoSuchKey) { // no key: only files not committed yet
		return n.fsys.errno("rename "+src, err)
	}
	return 0
}

func (f *fsys) maxRenameKeys() int { return cmp.Or(f.opts.MaxRenameKeys, DefaultMaxRenameKeys) }

// Link fails: a key has one name, and a version row cannot be shared by
// two keys that change independently.
func (n *dirNode) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
