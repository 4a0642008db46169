package fs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// .snapshots/<instant>/ at the root shows the whole bucket as it was at
// an RFC 3339 instant (2026-12-02T10:15:00Z, 2026-12-02T11:15:00.5+01:00),
// read-only: each file is the version that was latest then, each
// directory one that existed then (by its marker or by a key under it).
// It is read from the versions by the core's as-of listing: nothing is
// copied when a view is made, and nothing is stored for it. How far back
// a view reaches is decided by the bucket's retention: a version the
// collector has expired is missing from every view. Looking up a name
// that is not an instant finds nothing (ENOENT), and .snapshots itself
// lists nothing: the instants are not a finite set. A mount with
// Options.AsOf has a view as its root, and neither .versions nor
// .snapshots: keys of those names are shown there like any other.
//
// An instant still to come shows the bucket as it is now, and as it
// changes until the instant has passed: a view is the newest version of
// each key not newer than the instant, whenever it is asked. It is cached
// by the kernel only for the mount's timeouts until it has settled
// (snapshotSettle), and for snapshotTimeout from then on: a settled view
// no longer changes, unless retention removes versions from it.
const (
	snapshotsName = ".snapshots"
	// snapshotSettle is how long after an instant a version stamped at or
	// before it may still commit: a write is stamped when it is prepared
	// and commits moments later (the mount's journal, a transaction in
	// flight elsewhere). The clocks of the processes writing a bucket
	// must agree within it too.
	snapshotSettle = time.Minute
	// snapshotTimeout is how long the kernel may keep what it knows about
	// a settled view.
	snapshotTimeout = time.Hour
)

// virtualName reports whether name is one the mount's root keeps for its
// own directories: keys of that name at the root are not shown there.
func virtualName(name string) bool { return name == versionsName || name == snapshotsName }

// snapshotsRoot returns the inode of .snapshots.
func (n *dirNode) snapshotsRoot(ctx context.Context, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(snapshotsName)
	if ch == nil {
		ch = n.NewInode(ctx, &snapshotsDir{node: node{fsys: n.fsys}}, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	n.fsys.virtualDirAttr(&out.Attr)
	return ch
}

// newRoot returns the root of a mount: the live tree, or a view of the
// bucket as it was at Options.AsOf.
func (f *fsys) newRoot() fusefs.InodeEmbedder {
	if !f.opts.AsOf.IsZero() {
		return &snapDir{node: node{fsys: f}, at: f.opts.AsOf}
	}
	return &dirNode{node: node{fsys: f}}
}

// snapshotsDir is .snapshots: a lookup of an instant makes its view.
type snapshotsDir struct {
	node
	readOnlyDir
}

var (
	_ = (fusefs.NodeGetattrer)((*snapshotsDir)(nil))
	_ = (fusefs.NodeLookuper)((*snapshotsDir)(nil))
	_ = (fusefs.NodeOpendirHandler)((*snapshotsDir)(nil))
	_ = (fusefs.NodeCreater)((*snapshotsDir)(nil))
	_ = (fusefs.NodeRenamer)((*snapshotsDir)(nil))
)

func (n *snapshotsDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fsys.virtualDirAttr(&out.Attr)
	return 0
}

// Lookup accepts RFC 3339 instants with or without fractional seconds, in
// UTC (Z) or with an offset. Two spellings of one instant are two names
// of the same view.
func (n *snapshotsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	at, err := time.Parse(time.RFC3339Nano, name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	ch := n.GetChild(name)
	if ch == nil {
		ch = n.NewInode(ctx, &snapDir{node: node{fsys: n.fsys}, at: at}, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	d := ch.Operations().(*snapDir)
	d.attr(&out.Attr)
	d.cache(out)
	return ch, 0
}

func (n *snapshotsDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	return newDirHandle(func() pager { return noEntries{} }, nil, n.fsys.j.sync), 0, 0
}

func (n *snapshotsDir) userMeta(context.Context) (map[string]string, syscall.Errno) { return nil, 0 }

// noEntries lists nothing.
type noEntries struct{}

func (noEntries) next(context.Context) ([]dirent, bool, error) { return nil, true, nil }

// A snapDir is a directory of the bucket as it was at an instant: the
// root of a view (.snapshots/<instant>, or the root of a mount with
// Options.AsOf) or a directory under it. Its files are versionFiles.
type snapDir struct {
	node
	readOnlyDir
	at     time.Time
	prefix string // the prefix of the keys in it: "" for the view's root, else its path and "/"
	// marker is the directory's marker at the instant; nil when it had
	// none. It changes only while the instant is still to come.
	marker atomic.Pointer[meta.Version]
}

var (
	_ = (fusefs.NodeGetattrer)((*snapDir)(nil))
	_ = (fusefs.NodeLookuper)((*snapDir)(nil))
	_ = (fusefs.NodeOpendirHandler)((*snapDir)(nil))
	_ = (fusefs.NodeSetattrer)((*snapDir)(nil))
	_ = (fusefs.NodeCreater)((*snapDir)(nil))
	_ = (fusefs.NodeMkdirer)((*snapDir)(nil))
	_ = (fusefs.NodeMknoder)((*snapDir)(nil))
	_ = (fusefs.NodeSymlinker)((*snapDir)(nil))
	_ = (fusefs.NodeLinker)((*snapDir)(nil))
	_ = (fusefs.NodeUnlinker)((*snapDir)(nil))
	_ = (fusefs.NodeRmdirer)((*snapDir)(nil))
	_ = (fusefs.NodeRenamer)((*snapDir)(nil))
)

// settled reports whether the view can no longer change (but for
// retention), by the core's clock: the one its versions are stamped by.
func (n *snapDir) settled() bool { return n.fsys.svc.Now().Sub(n.at) > snapshotSettle }

// cache lets the kernel keep an entry of a settled view for long.
func (n *snapDir) cache(out *fuse.EntryOut) {
	if n.settled() {
		out.SetEntryTimeout(snapshotTimeout)
		out.SetAttrTimeout(snapshotTimeout)
	}
}

func (n *snapDir) attr(out *fuse.Attr) {
	n.fsys.dirAttr(n.marker.Load(), out)
	out.Mode &^= 0o222
}

func (n *snapDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	if n.settled() {
		out.SetTimeout(snapshotTimeout)
	}
	return 0
}

func (n *snapDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	key := n.prefix + name
	if len(name) > maxName || len(key) > meta.MaxKeyLen {
		return nil, syscall.ENAMETOOLONG
	}
	n.fsys.j.settle(key, key+"/")
	st, err := n.fsys.statAsOf(ctx, key, n.at)
	switch {
	case err != nil:
		return nil, n.fsys.errno("lookup "+key+" as of "+n.at.Format(time.RFC3339Nano), err)
	case st.Dir:
		return n.dirChild(ctx, name, st.Marker, out), 0
	case st.File != nil:
		return n.fileChild(ctx, name, st.File, out), 0
	}
	n.cache(out) // a name absent from a settled view stays absent
	return nil, syscall.ENOENT
}

// statAsOf is object.Service.Stat over the bucket as it was at instant
// at, but for File when the name is a directory then (the directory wins,
// as in the live tree).
func (f *fsys) statAsOf(ctx context.Context, key string, at time.Time) (object.Node, error) {
	var st object.Node
	// The marker sorts first under the prefix, and one entry tells
	// whether any key lay under it.
	res, err := f.svc.ListAsOf(ctx, f.bucket, at, meta.ListOptions{Prefix: key + "/", Delimiter: "/", MaxKeys: 1})
	if err != nil {
		return st, err
	}
	if len(res.Objects) > 0 || len(res.CommonPrefixes) > 0 {
		st.Dir = true
		if len(res.Objects) > 0 && res.Objects[0].Key == key+"/" {
			st.Marker = res.Objects[0]
		}
		return st, nil
	}
	v, err := f.svc.VersionAt(ctx, f.bucket, key, at)
	switch {
	case meta.IsNotFound(err):
		return st, nil
	case err != nil:
		return st, err
	}
	if !v.DeleteMarker {
		st.File = v
	}
	return st, nil
}

// dirChild returns the inode of the subdirectory name, whose marker is
// marker (nil when it has none).
func (n *snapDir) dirChild(ctx context.Context, name string, marker *meta.Version, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(name)
	d, ok := (*snapDir)(nil), false
	if ch != nil {
		d, ok = ch.Operations().(*snapDir)
	}
	if !ok {
		d = &snapDir{node: node{fsys: n.fsys}, at: n.at, prefix: n.prefix + name + "/"}
		ch = n.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	d.marker.Store(marker)
	d.attr(&out.Attr)
	n.cache(out)
	return ch
}

// fileChild returns the inode of the file or symlink name, whose version
// at the instant is v: the one known under that name if it shows v.
func (n *snapDir) fileChild(ctx context.Context, name string, v *meta.Version, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(name)
	f, ok := (*versionFile)(nil), false
	if ch != nil {
		f, ok = ch.Operations().(*versionFile)
	}
	if !ok || f.v.ID != v.ID {
		f = &versionFile{node: node{fsys: n.fsys}, v: v}
		mode := n.fsys.posix(v, false).Mode & syscall.S_IFMT
		ch = n.NewInode(ctx, f, fusefs.StableAttr{Mode: mode})
	}
	f.attr(&out.Attr)
	n.cache(out)
	return ch
}

// OpendirHandle lists the directory as the live tree's are listed, from
// the as-of listing, page by page. The kernel keeps the listing of a
// settled view in its page cache, and lists it again from there.
func (n *snapDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	list := func() pager {
		n.fsys.j.settle(n.prefix)
		return &listPager{fsys: n.fsys, at: n.at, merge: merger{prefix: n.prefix}}
	}
	var keep uint32
	if n.settled() {
		keep = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	h := newDirHandle(list, n.direntLookup, n.fsys.j.sync)
	h.dir = n.EmbeddedInode() // lets the listing see that ls -l looks its bare entries up (see maxPlus)
	return h, keep, 0
}

// direntLookup answers READDIRPLUS: a file from the version listed, a
// directory by a lookup, which finds its marker.
func (n *snapDir) direntLookup(ctx context.Context, e dirent, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if e.v != nil {
		return n.fileChild(ctx, e.name, e.v, out), 0
	}
	return n.Lookup(ctx, e.name, out)
}

func (n *snapDir) userMeta(context.Context) (map[string]string, syscall.Errno) {
	if m := n.marker.Load(); m != nil {
		return m.UserMeta, 0
	}
	return nil, 0
}

// list is object.Service.List, or ListAsOf when at is set.
func (f *fsys) list(ctx context.Context, at time.Time, o meta.ListOptions) (*meta.ListResult, error) {
	if at.IsZero() {
		return f.svc.List(ctx, f.bucket, o)
	}
	return f.svc.ListAsOf(ctx, f.bucket, at, o)
}
