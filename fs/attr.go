package fs

import (
	"context"
	"maps"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// posix returns the POSIX attributes of a version, or the mount's defaults
// for one that carries none (an object written over S3): owned by the
// default owner, modified when it was written. The type bits are those of
// a directory when dir is set, else of a symlink or a regular file;
// whatever else a row says is ignored. v may be nil (an implicit
// directory).
func (f *fsys) posix(v *meta.Version, dir bool) meta.POSIX {
	var p meta.POSIX
	switch {
	case v != nil && v.POSIX != nil:
		p = *v.POSIX
	case dir:
		p = meta.POSIX{Mode: 0o777 &^ f.opts.Umask, UID: f.opts.UID, GID: f.opts.GID}
	default:
		p = meta.POSIX{Mode: 0o666 &^ f.opts.Umask, UID: f.opts.UID, GID: f.opts.GID}
	}
	switch {
	case dir:
		p.Mode = syscall.S_IFDIR | p.Mode&0o7777
	case p.Mode&syscall.S_IFMT != syscall.S_IFLNK:
		p.Mode = syscall.S_IFREG | p.Mode&0o7777
	}
	if p.Mtime.IsZero() {
		p.Mtime = f.start
		if v != nil {
			p.Mtime = v.LastModified()
		}
	}
	return p
}

// newPOSIX returns the attributes of a file the caller creates.
func (f *fsys) newPOSIX(ctx context.Context, mode uint32) meta.POSIX {
	p := meta.POSIX{Mode: mode, UID: f.opts.UID, GID: f.opts.GID, Mtime: time.Now()}
	if c, ok := fuse.FromContext(ctx); ok {
		p.UID, p.GID = c.Uid, c.Gid
	}
	return p
}

// attrsOf returns the attributes a new version of v starts from, with
// POSIX attributes always set: the defaults when v has none, as for a
// directory when dir is set.
func (f *fsys) attrsOf(v *meta.Version, dir bool) object.Attrs {
	p := f.posix(v, dir)
	a := object.Attrs{POSIX: &p}
	if v != nil {
		a.Content, a.UserMeta, a.StorageClass, a.Checksums = v.Content, v.UserMeta, v.StorageClass, v.Checksums
	}
	return a
}

// fileAttr fills out with the attributes of a file or symlink version.
// ctime is when the version was written: any change makes a version.
func (f *fsys) fileAttr(v *meta.Version, out *fuse.Attr) {
	p := f.posix(v, false)
	size := v.Size
	if p.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		size = int64(len(p.Symlink))
	}
	setAttr(out, p, size, v.LastModified())
}

// dirAttr fills out with the attributes of a directory, from its marker
// when it has one.
func (f *fsys) dirAttr(marker *meta.Version, out *fuse.Attr) {
	p := f.posix(marker, true)
	setAttr(out, p, 0, p.Mtime)
}

func setAttr(out *fuse.Attr, p meta.POSIX, size int64, ctime time.Time) {
	out.Mode = p.Mode
	out.Owner = fuse.Owner{Uid: p.UID, Gid: p.GID}
	out.Size = uint64(size)
	out.Blocks = (out.Size + 511) / 512
	out.Nlink = 1
	out.SetTimes(&p.Mtime, &p.Mtime, &ctime)
}

// changesPOSIX reports whether a SETATTR asks for a change that is
// stored: atime is not.
func changesPOSIX(in *fuse.SetAttrIn) bool {
	return in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID|fuse.FATTR_MTIME) != 0
}

// sameAttrs reports whether b shows what a shows. A change from a to b
// is none and makes no version: an editor's fchmod to the mode its file
// has, or chmod -R, cp -a and rsync over files that are already so.
func sameAttrs(a, b object.Attrs) bool {
	return samePOSIX(a.POSIX, b.POSIX) && a.Content == b.Content &&
		maps.Equal(a.UserMeta, b.UserMeta) && a.StorageClass == b.StorageClass &&
		maps.Equal(a.Checksums, b.Checksums) && a.Owner == b.Owner
}

func samePOSIX(p, q *meta.POSIX) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.Mode == q.Mode && p.UID == q.UID && p.GID == q.GID &&
		p.Mtime.Equal(q.Mtime) && p.Symlink == q.Symlink
}

// setPOSIX applies the chmod, chown and utimes of a SETATTR to p.
func setPOSIX(p *meta.POSIX, in *fuse.SetAttrIn) {
	if m, ok := in.GetMode(); ok {
		p.Mode = p.Mode&syscall.S_IFMT | m
	}
	if uid, ok := in.GetUID(); ok {
		p.UID = uid
	}
	if gid, ok := in.GetGID(); ok {
		p.GID = gid
	}
	if t, ok := in.GetMTime(); ok {
		p.Mtime = t
	}
}
