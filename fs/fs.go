// Package fs shows a bucket as a POSIX directory tree over FUSE, on
// go-fuse's fs API. It calls nothing below package object, so the mount
// and the S3 endpoint obey one set of version semantics (DESIGN.md's FUSE
// table is the mapping):
//
//   - A key is a file; a directory is a prefix ending in "/" that a key
//     lies under, or a zero-byte "d/" marker carrying the directory's
//     mode and owner. When "a" and "a/…" both exist the directory wins;
//     the file stays reachable over S3 and under .versions.
//   - A file written in the mount becomes one new version when it is
//     closed or fsynced, never one per write: writes are streamed to the
//     chunk store or staged on local disk (see draft) and committed whole.
//   - .versions/ at the root, reachable by name but never listed, holds
//     every version of every key, deleted ones included (see versions.go).
//   - .snapshots/<instant>/ at the root, reachable by name but never
//     listed, is the whole bucket as it was at an RFC 3339 instant,
//     read-only (see snapshots.go); Options.AsOf mounts such a view.
//   - Changes committed by others in this process invalidate the kernel's
//     caches at once (see notify.go); other processes' changes show
//     within the entry and attribute timeouts.
//
// What is durable when. The mount commits behind the calls that change
// it (see journal): a write is prepared when the call returns and its row
// commits moments later, batched with the mount's other changes so that
// they share one meta-store commit and its fsync.
//
//   - close(2) of a file written returns once its new version is
//     prepared: its bytes are durable in the chunk store (or kept in the
//     row, for files of data.DefaultInlineMax bytes or less) and the row
//     is queued. unlink, rename, mkdir, rmdir, symlink, chmod, chown,
//     utimes, truncate and setxattr return once queued, likewise.
//   - fsync(2) or fdatasync(2) of a file, on any of its handles, returns
//     once every version of it queued so far is committed: durable, and
//     seen by every reader of the store. fsync of a directory returns once
//     every change queued in the mount before it is committed.
//   - Unmounting (Unmount, umount(8), SIGINT or SIGTERM to stratafs
//     mount) returns once every queued change is committed.
//   - A crash loses the changes queued and not committed yet, and only
//     whole: each version commits entirely or not at all, and the changes
//     of one key commit in the order they were made.
//
// Until a queued change commits the mount shows it (the inodes that made
// it answer for it; a question put to the store about a name with
// changes queued waits for them) while other readers of the store, S3
// clients among them, do not see it yet. A change the store cannot take
// for now (unreachable, its disk full) stays queued and is tried again
// (see journal). One that fails for good is logged, and the next close or
// fsync of its file fails with EIO; the mount then shows the store's
// version again. A change of
// attributes made while the file's last version still waits in the queue
// joins that version rather than making one of its own.
package fs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// DefaultMaxRenameKeys is how many keys a directory rename moves at most
// by default: they all go into one commit. Past it rename fails with
// EXDEV, on which mv falls back to copying and deleting.
const DefaultMaxRenameKeys = 10_000

// maxName is the longest name a path component may have (NAME_MAX).
// Keys whose components are longer, empty, "." or ".." are not shown.
const maxName = 255

// Options configure a mount.
type Options struct {
	// StagingDir holds the bytes written to open files until they are
	// committed (the data directory's staging/). Staged files are
	// unlinked as soon as they are created, so a crash leaves nothing.
	StagingDir string
	// ReadOnly mounts the bucket read-only.
	ReadOnly bool
	// AsOf, when set, mounts the bucket as it was at that instant,
	// read-only: the view .snapshots/<instant>/ shows (see snapshots.go).
	AsOf time.Time
	// AllowOther lets users other than the one mounting use the mount;
	// the kernel then checks permissions against the files' modes.
	AllowOther bool
	// UID, GID and Umask give keys that carry no POSIX attributes an
	// owner and permissions: files 0666 and directories 0777, less Umask.
	UID, GID uint32
	Umask    uint32
	// EntryTimeout and AttrTimeout are how long the kernel may cache
	// names and attributes without asking again: they bound how stale the
	// mount may look after a change made by another process. Failed
	// lookups are cached for EntryTimeout too. Zero disables caching.
	EntryTimeout, AttrTimeout time.Duration
	// MaxRenameKeys bounds a directory rename (DefaultMaxRenameKeys when 0).
	MaxRenameKeys int
	// Logger receives errors that cannot be returned to a caller (a
	// commit that failed when the last handle of a file was released);
	// slog.Default() when nil.
	Logger *slog.Logger
}

// fsys is one mounted bucket: the state every node shares.
type fsys struct {
	svc    *object.Service
	bucket string
	opts   Options
	log    *slog.Logger
	// start stands in for the modification time of directories that have
	// no marker and so no time of their own.
	start time.Time
	own   ownKeys
	j     *journal
	// invalid makes the kernel forget what it cached about a key.
	invalid func(key string)
	// streams holds a token per file being streamed (see stream).
	streams chan struct{}
	// ahead answers lookups of names in listing order (see lookahead).
	ahead lookahead
}

// node is embedded in every node type.
type node struct {
	fusefs.Inode
	fsys *fsys
}

// path returns the key path of a node of the live tree: its names from
// the root joined by "/", "" for the root itself. ok is false when the
// node has been unlinked (or replaced by a rename): its key is gone.
func (n *node) path() (p string, ok bool) {
	var names []string
	in := &n.Inode
	for !in.IsRoot() {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		in = parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), true
}

var _ = (fusefs.NodeStatfser)((*node)(nil))

// Statfs reports the space of the disk the staging directory is on: with
// the default local chunk store, the disk the bytes go to.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.fsys.opts.StagingDir, &st); err != nil {
		return fusefs.ToErrno(err)
	}
	out.FromStatfsT(&st)
	out.NameLen = maxName
	return 0
}

// validName reports whether a key component can be a file name.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= maxName &&
		!strings.ContainsAny(name, "/\x00")
}

// ownKeys counts the keys this mount is committing. Changes the kernel
// made itself need no invalidation, and skipping it keeps the kernel's
// caches warm for the file just written. An entry ending in "/" covers
// every key under it (a directory rename).
type ownKeys struct {
	mu   sync.Mutex
	keys map[string]int
}

// hold marks keys as being committed by this mount until release is
// called.
func (o *ownKeys) hold(keys ...string) (release func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys = map[string]int{}
	}
	for _, k := range keys {
		o.keys[k]++
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, k := range keys {
			if o.keys[k]--; o.keys[k] == 0 {
				delete(o.keys, k)
			}
		}
	}
}

// has reports whether key is being committed by this mount: it, or a
// prefix of it that ends in "/".
func (o *ownKeys) has(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys[key] > 0 {
		return true
	}
	for i := range len(key) {
		if key[i] == '/' && o.keys[key[:i+1]] > 0 {
			return true
		}
	}
	return false
}

// queue prepares a write with the core and queues it in the journal;
// failed, if not nil, is called should its commit fail. An error is the
// preparation's: then nothing is queued.
func (f *fsys) queue(ctx context.Context, failed func(error), write func(d *object.Service) error) (*change, error) {
	p, err := f.svc.Prepare(ctx, write)
	if err != nil {
		return nil, err
	}
	return f.j.add(p, failed), nil
}

// absent is a commit check that the key does not exist yet: mkdir and
// symlink must not replace anything.
func absent(head *meta.Version) error {
	if head != nil && !head.DeleteMarker {
		return syscall.EEXIST
	}
	return nil
}
