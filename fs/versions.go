package fs

import (
	"context"
	"strings"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
)

// The .versions tree shows every version of every key, read-only.
// .versions/<path>/ holds one file per version of the key <path>, newest
// first in listing order, named by its time so that ls sorts it, and one
// directory per name that ever existed under <path>/, deleted ones
// included. Delete markers are empty files whose names end in .deleted.
// Nothing under .versions is read from the store until it is visited.
const (
	versionsName = ".versions"
	// versionTime names a version file: its LastModified in UTC with all
	// nine digits of nanoseconds, so that names sort by time.
	versionTime   = "2006-01-02T15:04:05.000000000Z"
	deletedSuffix = ".deleted"
)

// versionName returns the name of v's file.
func versionName(v *meta.Version) string {
	name := v.LastModified().Format(versionTime)
	if v.DeleteMarker {
		name += deletedSuffix
	}
	return name
}

// parseVersionName is the inverse of versionName.
func parseVersionName(name string) (t time.Time, deleted, ok bool) {
	stamp, deleted := strings.CutSuffix(name, deletedSuffix)
	t, err := time.Parse(versionTime, stamp)
	return t, deleted, err == nil
}

// A versionsDir is .versions or a directory under it.
type versionsDir struct {
	node
	readOnlyDir
	key string // the path listed; "" for .versions itself
}

var (
	_ = (fusefs.NodeGetattrer)((*versionsDir)(nil))
	_ = (fusefs.NodeLookuper)((*versionsDir)(nil))
	_ = (fusefs.NodeOpendirHandler)((*versionsDir)(nil))
	_ = (fusefs.NodeSetattrer)((*versionsDir)(nil))
	_ = (fusefs.NodeCreater)((*versionsDir)(nil))
	_ = (fusefs.NodeMkdirer)((*versionsDir)(nil))
	_ = (fusefs.NodeMknoder)((*versionsDir)(nil))
	_ = (fusefs.NodeSymlinker)((*versionsDir)(nil))
	_ = (fusefs.NodeLinker)((*versionsDir)(nil))
	_ = (fusefs.NodeUnlinker)((*versionsDir)(nil))
	_ = (fusefs.NodeRmdirer)((*versionsDir)(nil))
	_ = (fusefs.NodeRenamer)((*versionsDir)(nil))
)

// versionsRoot returns the inode of .versions.
func (n *dirNode) versionsRoot(ctx context.Context, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(versionsName)
	if ch == nil {
		ch = n.NewInode(ctx, &versionsDir{node: node{fsys: n.fsys}}, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	ch.Operations().(*versionsDir).attr(&out.Attr)
	return ch
}

func (n *versionsDir) attr(out *fuse.Attr) { n.fsys.virtualDirAttr(out) }

// virtualDirAttr fills out with the attributes of the mount's own
// directories (.versions, .snapshots): read-only, owned by the default
// owner, made when the bucket was mounted.
func (f *fsys) virtualDirAttr(out *fuse.Attr) {
	setAttr(out, meta.POSIX{Mode: syscall.S_IFDIR | 0o555, UID: f.opts.UID, GID: f.opts.GID, Mtime: f.start}, 0, f.start)
}

func (n *versionsDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	return 0
}

// childKey returns the path of the entry name.
func (n *versionsDir) childKey(name string) string {
	if n.key == "" {
		return name
	}
	return n.key + "/" + name
}

func (n *versionsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if t, deleted, ok := parseVersionName(name); ok && n.key != "" {
		n.fsys.j.settle(n.key)
		v, err := n.fsys.svc.VersionAt(ctx, n.fsys.bucket, n.key, t)
		switch {
		case err == nil && v.LastModified().Equal(t) && v.DeleteMarker == deleted:
			return n.versionChild(ctx, name, v, out), 0
		case err != nil && !meta.IsNotFound(err):
			return nil, n.fsys.errno("lookup version of "+n.key, err)
		}
	}
	key := n.childKey(name)
	if len(name) > maxName || len(key) > meta.MaxKeyLen {
		return nil, syscall.ENAMETOOLONG
	}
	n.fsys.j.settle(key, key+"/")
	st, err := n.fsys.svc.StatHistory(ctx, n.fsys.bucket, key)
	switch {
	case err != nil:
		return nil, n.fsys.errno("lookup history of "+key, err)
	case st.File == nil && !st.Dir:
		return nil, syscall.ENOENT
	}
	return n.dirChild(ctx, name, out), 0
}

func (n *versionsDir) dirChild(ctx context.Context, name string, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(name)
	if ch == nil || !ch.IsDir() {
		ch = n.NewInode(ctx, &versionsDir{node: node{fsys: n.fsys}, key: n.childKey(name)}, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	ch.Operations().(*versionsDir).attr(&out.Attr)
	return ch
}

func (n *versionsDir) versionChild(ctx context.Context, name string, v *meta.Version, out *fuse.EntryOut) *fusefs.Inode {
	ch := n.GetChild(name)
	if ch == nil || ch.IsDir() {
		mode := n.fsys.posix(v, false).Mode & syscall.S_IFMT
		ch = n.NewInode(ctx, &versionFile{node: node{fsys: n.fsys}, v: v}, fusefs.StableAttr{Mode: mode})
	}
	ch.Operations().(*versionFile).attr(&out.Attr)
	return ch
}

func (n *versionsDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	list := func() pager {
		// The mount's own changes are listed once committed.
		n.fsys.j.settle(n.key, n.key+"/")
		p := &versionsPager{fsys: n.fsys, key: n.key, names: n.key == ""}
		p.merge.prefix = p.namesPrefix()
		return p
	}
	h := newDirHandle(list, n.direntLookup, n.fsys.j.sync)
	h.dir = n.EmbeddedInode()
	return h, 0, 0
}

// direntLookup answers READDIRPLUS from the listing alone: it named
// versions and names that exist.
func (n *versionsDir) direntLookup(ctx context.Context, e dirent, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if e.v != nil {
		return n.versionChild(ctx, e.name, e.v, out), 0
	}
	return n.dirChild(ctx, e.name, out), 0
}

func (n *versionsDir) userMeta(context.Context) (map[string]string, syscall.Errno) { return nil, 0 }

// A readOnlyDir refuses everything that would change the directory that
// embeds it, or the tree under it.
type readOnlyDir struct{}

func (readOnlyDir) updateUserMeta(context.Context, func(map[string]string) error) syscall.Errno {
	return syscall.EROFS
}

func (readOnlyDir) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnlyDir) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnlyDir) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnlyDir) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnlyDir) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnlyDir) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnlyDir) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }

func (readOnlyDir) Rmdir(context.Context, string) syscall.Errno { return syscall.EROFS }

func (readOnlyDir) Rename(context.Context, string, fusefs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}

// A versionFile is one version, read-only; a delete marker reads as an
// empty file.
type versionFile struct {
	node
	v *meta.Version
}

var (
	_ = (fusefs.NodeGetattrer)((*versionFile)(nil))
	_ = (fusefs.NodeOpener)((*versionFile)(nil))
	_ = (fusefs.NodeReadlinker)((*versionFile)(nil))
	_ = (fusefs.NodeSetattrer)((*versionFile)(nil))
)

func (n *versionFile) attr(out *fuse.Attr) {
	n.fsys.fileAttr(n.v, out)
	out.Mode &^= 0o222
}

func (n *versionFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	return 0
}

// Open reads the version; its bytes never change, so the kernel may keep
// them cached.
func (n *versionFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	v, err := n.fsys.whole(ctx, n.v)
	if err != nil {
		return nil, 0, n.fsys.errno("open", err)
	}
	r, err := n.fsys.svc.ReaderAt(ctx, v)
	if err != nil {
		return nil, 0, n.fsys.errno("open", err)
	}
	return &readHandle{fsys: n.fsys, v: v, r: r}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *versionFile) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if n.v.POSIX == nil {
		return nil, syscall.EINVAL
	}
	return []byte(n.v.POSIX.Symlink), 0
}

func (n *versionFile) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (n *versionFile) userMeta(context.Context) (map[string]string, syscall.Errno) {
	return n.v.UserMeta, 0
}

func (n *versionFile) updateUserMeta(context.Context, func(map[string]string) error) syscall.Errno {
	return syscall.EROFS
}

// versionsPager lists a .versions directory: first the versions of its
// key, in the store's order (newest first), then every name that ever
// existed under it.
type versionsPager struct {
	fsys  *fsys
	key   string
	names bool // listing the names; the versions are done
	// keyMarker and idMarker resume the store's versions listing.
	keyMarker, idMarker string
	lastKey             string // names: the key whose rows are being passed
	merge               merger
}

// namesPrefix is the prefix of the keys whose names the directory lists.
func (p *versionsPager) namesPrefix() string {
	if p.key == "" {
		return ""
	}
	return p.key + "/"
}

func (p *versionsPager) next(ctx context.Context) ([]dirent, bool, error) {
	prefix := p.key
	if p.names {
		prefix = p.namesPrefix()
	}
	res, err := p.fsys.svc.ListVersions(ctx, p.fsys.bucket, meta.VersionListOptions{
		Prefix: prefix, Delimiter: "/", KeyMarker: p.keyMarker, VersionIDMarker: p.idMarker,
	})
	if err != nil {
		return nil, false, p.fsys.errno("list versions "+prefix, err)
	}
	p.keyMarker, p.idMarker = res.NextKeyMarker, res.NextVersionIDMarker
	if p.idMarker == meta.NullVersion {
		// "null" names whichever row is the key's null version when the
		// next page is read: a PUT in a suspended bucket may have put a
		// new one at the head since, or removed it. The row's own id
		// resumes after it, even if it is gone (ids are ordered).
		p.idMarker = res.Versions[len(res.Versions)-1].ID.String()
	}
	if !p.names {
		return p.versions(res), false, nil
	}
	var out []dirent
	vs, cps := res.Versions, res.CommonPrefixes
	for len(vs) > 0 || len(cps) > 0 {
		if len(cps) == 0 || len(vs) > 0 && vs[0].Key < cps[0] {
			if k := vs[0].Key; k != p.lastKey {
				p.lastKey = k
				out = p.merge.key(out, dirent{name: k[len(prefix):], mode: syscall.S_IFDIR}, k)
			}
			vs = vs[1:]
		} else {
			out = p.merge.dir(out, cps[0])
			cps = cps[1:]
		}
	}
	if res.IsTruncated {
		return out, false, nil
	}
	return p.merge.end(out), true, nil
}

// versions turns a page of the listing with the key as prefix into
// version files. The key's rows come first (it sorts before every other
// key it prefixes); the first row of another key ends them, and the
// listing goes on with the names.
func (p *versionsPager) versions(res *meta.VersionListResult) []dirent {
	var out []dirent
	for _, e := range res.Versions {
		if e.Key != p.key {
			break
		}
		mode := p.fsys.posix(e.Version, false).Mode & syscall.S_IFMT
		out = append(out, dirent{name: versionName(e.Version), mode: mode, v: e.Version})
	}
	if len(out) < len(res.Versions) || len(res.CommonPrefixes) > 0 || !res.IsTruncated {
		p.names, p.keyMarker, p.idMarker = true, "", ""
	}
	return out
}
