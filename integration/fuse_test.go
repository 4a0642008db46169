package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// fuseChunk keeps multi-chunk files small.
const fuseChunk = 64 << 10

// A fuseMount is a real FUSE mount of bucket "bkt" (versioned) over a
// bolt meta store and local chunks in a temporary directory.
type fuseMount struct {
	t   *testing.T
	ctx context.Context
	svc *object.Service
	dir string
}

// cacheForever makes the kernel trust its caches for the whole test: what
// the mount shows after a change from outside is then due to invalidation.
const cacheForever = time.Hour

func newFUSEMount(t *testing.T, o fs.Options) *fuseMount {
	t.Helper()
	return newFUSEMountOver(t, o, func(m meta.Store) meta.Store { return m })
}

// skipWithoutFUSE skips a test, loudly, where FUSE is not available.
func skipWithoutFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("SKIPPING FUSE TEST: /dev/fuse is not available here (%v); CI runs it", err)
	}
}

// newFUSEMountOver is newFUSEMount with the meta store wrapped.
func newFUSEMountOver(t *testing.T, o fs.Options, wrap func(meta.Store) meta.Store) *fuseMount {
	t.Helper()
	skipWithoutFUSE(t)
	base := t.TempDir()
	m, err := bolt.Open(filepath.Join(base, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.Open(base, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	f := &fuseMount{t: t, ctx: context.Background(), svc: object.New(wrap(m), d, object.Options{ChunkSize: fuseChunk})}
	if _, err := f.svc.CreateBucket(f.ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SetVersioning(f.ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}
	f.dir = filepath.Join(base, "mnt")
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o.StagingDir = filepath.Join(base, "staging")
	if o.EntryTimeout == 0 {
		o.EntryTimeout, o.AttrTimeout = cacheForever, cacheForever
	}
	mp, err := fs.Mount(f.ctx, f.svc, "bkt", f.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if mp.Unmount() == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("unmount %s failed; detaching it", f.dir)
		syscall.Unmount(f.dir, syscall.MNT_DETACH)
		<-mp.Done()
	})
	return f
}

func (f *fuseMount) path(name string) string { return filepath.Join(f.dir, name) }

func (f *fuseMount) read(name string) []byte {
	f.t.Helper()
	b, err := os.ReadFile(f.path(name))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fuseMount) write(name string, b []byte) {
	f.t.Helper()
	if err := os.WriteFile(f.path(name), b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// appendLine appends line to name in the mount as a shell's >> does: an
// open with O_APPEND, one write, a close.
func (f *fuseMount) appendLine(name, line string) {
	f.t.Helper()
	w, err := os.OpenFile(f.path(name), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := w.WriteString(line); err != nil {
		f.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fuseMount) put(key string, b []byte) *meta.Version {
	f.t.Helper()
	v, err := f.svc.Put(f.ctx, "bkt", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))})
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// settle waits until every change made in the mount so far is
// committed, as a program would: fsync of a directory waits for them all.
// The mount commits closes, unlinks and renames behind the calls that
// make them, so the store may lag behind what those calls returned.
func (f *fuseMount) settle() {
	f.t.Helper()
	syncMount(f.t, f.dir)
}

// head returns the latest version of key, once the mount's changes are
// committed.
func (f *fuseMount) head(key string) *meta.Version {
	f.t.Helper()
	f.settle()
	v, err := f.svc.Head(f.ctx, "bkt", key, "")
	if err != nil {
		f.t.Fatalf("head %s: %v", key, err)
	}
	return v
}

// stored returns the bytes of the latest version of key, read from the
// core, not through the mount, once the mount's changes are committed.
func (f *fuseMount) stored(key string) []byte {
	f.t.Helper()
	f.settle()
	return f.committed(key)
}

// committed returns the bytes of the latest version of key the store has
// now.
func (f *fuseMount) committed(key string) []byte {
	f.t.Helper()
	obj, err := f.svc.Get(f.ctx, "bkt", key, "", 0, -1)
	if err != nil {
		f.t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// versions returns the rows of exactly key, in the store's order, once
// the mount's changes are committed.
func (f *fuseMount) versions(key string) []*meta.Version {
	f.t.Helper()
	f.settle()
	var vs []*meta.Version
	o := meta.VersionListOptions{Prefix: key}
	for {
		res, err := f.svc.ListVersions(f.ctx, "bkt", o)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, e := range res.Versions {
			if e.Key == key {
				vs = append(vs, e.Version)
			}
		}
		if !res.IsTruncated {
			return vs
		}
		o.KeyMarker, o.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
}

// names lists a directory of the mount in the order readdir returns.
func (f *fuseMount) names(name string) []string {
	f.t.Helper()
	d, err := os.Open(f.path(name))
	if err != nil {
		f.t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		f.t.Fatal(err)
	}
	return names
}

// eventually retries check until it passes: invalidation is asynchronous.
func fuseEventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func fuseWantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func fuseRandom(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func TestFUSEWritesMakeOneVersionPerClose(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})

	// A new file: its CRC32C as its checksum.
	f.write("new", []byte("hello"))
	if got := f.read("new"); string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	mountWritten(t, "a new file", f.head("new"), []byte("hello"))

	// 100 writes, one close: one version.
	file, err := os.Create(f.path("many"))
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 100 {
		chunk := []byte(fmt.Sprintf("write %03d\n", i))
		want = append(want, chunk...)
		if _, err := file.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.versions("many")); n != 0 {
		t.Errorf("%d versions before the close, want 0", n)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.versions("many")); n != 1 {
		t.Errorf("%d versions after 100 writes and a close, want 1", n)
	}
	if !bytes.Equal(f.stored("many"), want) {
		t.Error("stored bytes differ")
	}

	// A shell redirection opens, dup2s and closes the file before
	// writing: still one version.
	file, err = os.Create(f.path("redirected"))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(file.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(fd, []byte("echoed\n")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(fd); err != nil {
		t.Fatal(err)
	}
	if vs := f.versions("redirected"); len(vs) != 1 || vs[0].Size != 7 {
		t.Errorf("redirection: %d versions, want 1 of 7 bytes", len(vs))
	}
	// An empty file closed unwritten is committed on its release.
	if err := os.WriteFile(f.path("empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fuseEventually(t, "an empty file's version", func() error {
		if vs := f.versions("empty"); len(vs) != 1 || vs[0].Size != 0 {
			return fmt.Errorf("%d versions", len(vs))
		}
		return nil
	})

	// Append, random writes, a hole, truncations: each close is one
	// version, and the mount and the store agree with a model.
	model := fuseRandom(5*fuseChunk + 123)
	f.write("big", model)
	file, err = os.OpenFile(f.path("big"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		off := rand.IntN(len(model) + fuseChunk)
		p := fuseRandom(rand.IntN(3000) + 1)
		if _, err := file.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], p)
	}
	got := make([]byte, len(model))
	if _, err := file.ReadAt(got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("read back before the close through the writing handle: %v", err)
	}
	if err := file.Truncate(int64(len(model) - 1000)); err != nil {
		t.Fatal(err)
	}
	model = model[:len(model)-1000]
	if _, err := file.WriteAt([]byte("sparse"), int64(len(model)+70000)); err != nil {
		t.Fatal(err)
	}
	model = append(model, make([]byte, 70000)...)
	model = append(model, "sparse"...)
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.read("big"); !bytes.Equal(got, model) {
		t.Fatal("mount reads differ from the model")
	}
	if !bytes.Equal(f.stored("big"), model) {
		t.Fatal("stored bytes differ from the model")
	}
	vs := f.versions("big")
	if len(vs) != 2 || !strings.HasSuffix(vs[0].ETag, "-0") {
		t.Errorf("versions of big: %d, latest etag %q; want 2, an edit's etag", len(vs), vs[0].ETag)
	}

	// Append through O_APPEND.
	f.appendLine("new", ", world")
	if got := f.read("new"); string(got) != "hello, world" {
		t.Errorf("after append: %q", got)
	}

	// truncate(2) with no handle open commits at once, sharing chunks.
	if err := os.Truncate(f.path("big"), fuseChunk+5); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("big"); !bytes.Equal(got, model[:fuseChunk+5]) {
		t.Error("truncate(2): stored bytes differ")
	}
	if fi, err := os.Stat(f.path("big")); err != nil || fi.Size() != fuseChunk+5 {
		t.Errorf("size after truncate: %v, %v", fi, err)
	}

	// Rewriting with O_TRUNC: one version, with the new bytes' CRC32C.
	before := len(f.versions("new"))
	f.write("new", []byte("rewritten"))
	if vs := f.versions("new"); len(vs) != before+1 {
		t.Errorf("O_TRUNC rewrite: %d versions (had %d)", len(vs), before)
	}
	mountWritten(t, "a file rewritten with O_TRUNC", f.head("new"), []byte("rewritten"))

	// fsync commits without a close.
	file, err = os.OpenFile(f.path("synced"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write([]byte("durable")); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.committed("synced"); string(got) != "durable" {
		t.Errorf("after fsync the store holds %q", got)
	}
}

func TestFUSEHandlesOfOneFileShareWrites(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	a, err := os.Create(f.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.OpenFile(f.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.WriteAt([]byte("aaaa"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt([]byte("bb"), 2); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := a.ReadAt(got, 0); err != nil || string(got) != "aabb" {
		t.Fatalf("a reads %q, %v", got, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("f"); string(got) != "aabb" {
		t.Errorf("closing one handle committed %q, want both handles' writes", got)
	}
}

func TestFUSEAttributes(t *testing.T) {
	f := newFUSEMount(t, fs.Options{UID: 1234, GID: 5678, Umask: 0o027})

	// Keys written over S3 have no POSIX attributes: the defaults.
	v := f.put("plain", []byte("12345"))
	fi, err := os.Stat(f.path("plain"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() != 5 || fi.Mode() != 0o640 || st.Uid != 1234 || st.Gid != 5678 || !fi.ModTime().Equal(v.LastModified()) {
		t.Errorf("plain: size %d mode %v uid %d gid %d mtime %v; want 5 -rw-r----- 1234 5678 %v",
			fi.Size(), fi.Mode(), st.Uid, st.Gid, fi.ModTime(), v.LastModified())
	}
	f.put("implicit/x", nil)
	if fi, err := os.Stat(f.path("implicit")); err != nil || fi.Mode() != os.ModeDir|0o750 {
		t.Errorf("implicit directory: %v, %v", fi, err)
	}

	// Files created in the mount carry mode and owner.
	if err := os.WriteFile(f.path("mine"), []byte("x"), 0o604); err != nil {
		t.Fatal(err)
	}
	if p := f.head("mine").POSIX; p == nil || p.Mode != syscall.S_IFREG|0o604 || p.UID != uint32(os.Getuid()) {
		t.Errorf("created file's POSIX attributes: %+v", p)
	}

	// chmod, chown and utimes: metadata-only versions sharing the bytes.
	// (Each is let commit before the next: one made while the previous
	// waits to be committed joins it; see TestFUSEShowsItsQueuedChanges.)
	before := f.head("plain")
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	if err := os.Chmod(f.path("plain"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if err := os.Chown(f.path("plain"), 42, 43); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if err := os.Chtimes(f.path("plain"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	after := f.head("plain")
	if p := after.POSIX; p == nil || p.Mode != syscall.S_IFREG|0o600 || p.UID != 42 || p.GID != 43 || !p.Mtime.Equal(mtime) {
		t.Errorf("after chmod/chown/utimes: %+v", after.POSIX)
	}
	if !bytes.Equal(after.Manifest, before.Manifest) || after.ETag != before.ETag {
		t.Error("a metadata change did not share the bytes")
	}
	if n := len(f.versions("plain")); n != 4 {
		t.Errorf("%d versions, want 4 (put, chmod, chown, utimes)", n)
	}
	fi, err = os.Stat(f.path("plain"))
	if err != nil || fi.Mode() != 0o600 || !fi.ModTime().Equal(mtime) || fi.Sys().(*syscall.Stat_t).Uid != 42 {
		t.Errorf("stat after the changes: %v %v", fi.Mode(), fi.ModTime())
	}

	// While a file is open for writing, the changes join its next version.
	file, err := os.OpenFile(f.path("open"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.path("open"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.path("open"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if vs := f.versions("open"); len(vs) != 1 || vs[0].POSIX.Mode != syscall.S_IFREG|0o640 || !vs[0].POSIX.Mtime.Equal(mtime) {
		t.Errorf("open file: %d versions, latest %+v; want one with mode 0640 and the set mtime", len(vs), vs[0].POSIX)
	}

	// A change to what the file already has makes no version: an
	// editor's save (vim: write, fsync, fchmod to the mode the file has,
	// close) makes one, and so does a chmod -R, cp -a or rsync over files
	// already so.
	f.settle()
	save, err := os.OpenFile(f.path("plain"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := save.Write([]byte("saved")); err != nil {
		t.Fatal(err)
	}
	if err := save.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := save.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	if err := save.Close(); err != nil {
		t.Fatal(err)
	}
	f.settle()
	saved := f.head("plain")
	if err := os.Chmod(f.path("plain"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(f.path("plain"), 42, 43); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.path("plain"), time.Time{}, saved.POSIX.Mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.path("implicit"), 0o750); err != nil { // the default: no marker
		t.Fatal(err)
	}
	f.settle()
	if vs := f.versions("plain"); len(vs) != 5 || vs[0].ID != saved.ID {
		t.Errorf("%d versions, want 5 (the 4 above and the save's)", len(vs))
	}
	if v := f.head("plain"); v.POSIX.Mode != syscall.S_IFREG|0o600 || v.Size != 5 {
		t.Errorf("after the save: mode %o size %d, want 0600 and 5 bytes", v.POSIX.Mode, v.Size)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "implicit/", ""); !meta.IsNotFound(err) {
		t.Errorf("chmod of an implicit directory to the mode it shows made a marker: %v", err)
	}

	// Directories keep theirs in the marker; mkdir writes it.
	if err := os.Mkdir(f.path("d"), 0o711); err != nil {
		t.Fatal(err)
	}
	if p := f.head("d/").POSIX; p == nil || p.Mode != syscall.S_IFDIR|0o711 {
		t.Errorf("marker attributes: %+v", p)
	}
	if err := os.Chmod(f.path("implicit"), 0o700); err != nil {
		t.Fatal(err)
	}
	if p := f.head("implicit/").POSIX; p == nil || p.Mode != syscall.S_IFDIR|0o700 {
		t.Errorf("chmod of an implicit directory: marker %+v", p)
	}

	// Hard links are refused.
	fuseWantErrno(t, "link", os.Link(f.path("plain"), f.path("hard")), syscall.EPERM)
}

func TestFUSEXattrsAreUserMetadata(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	v, err := f.svc.Put(f.ctx, "bkt", "k", strings.NewReader("x"), object.PutOptions{Size: 1,
		Attrs: object.Attrs{UserMeta: map[string]string{"color": "red"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.path("k")
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(p, "user.color", buf); err != nil || string(buf[:n]) != "red" {
		t.Errorf("getxattr = %q, %v", buf[:n], err)
	}
	if err := unix.Setxattr(p, "user.Shape", []byte("round"), 0); err != nil {
		t.Fatal(err)
	}
	if got := f.head("k").UserMeta; got["shape"] != "round" || got["color"] != "red" {
		t.Errorf("user metadata after setxattr: %v", got)
	}
	set := f.head("k")
	if err := unix.Setxattr(p, "user.shape", []byte("round"), 0); err != nil {
		t.Fatal(err)
	}
	if v := f.head("k"); v.ID != set.ID {
		t.Error("setxattr of the value an attribute has made a version")
	}
	fuseWantErrno(t, "setxattr XATTR_CREATE of an existing name", unix.Setxattr(p, "user.shape", []byte("x"), unix.XATTR_CREATE), syscall.EEXIST)
	fuseWantErrno(t, "setxattr outside user.", unix.Setxattr(p, "trusted.x", []byte("x"), 0), syscall.ENOTSUP)
	n, err := unix.Listxattr(p, buf)
	if err != nil || string(buf[:n]) != "user.color\x00user.shape\x00" {
		t.Errorf("listxattr = %q, %v", buf[:n], err)
	}
	if err := unix.Removexattr(p, "user.color"); err != nil {
		t.Fatal(err)
	}
	if got := f.head("k").UserMeta; len(got) != 1 || got["shape"] != "round" {
		t.Errorf("user metadata after removexattr: %v", got)
	}
	if !bytes.Equal(f.head("k").Manifest, v.Manifest) {
		t.Error("an xattr change did not share the bytes")
	}
	_, err = unix.Getxattr(p, "user.color", buf)
	fuseWantErrno(t, "getxattr of a removed name", err, syscall.ENODATA)
}

func TestFUSESymlinks(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	f.write("target", []byte("pointed at"))
	if err := os.Symlink("target", f.path("link")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(f.path("link")); err != nil || got != "target" {
		t.Errorf("readlink = %q, %v", got, err)
	}
	if got := f.read("link"); string(got) != "pointed at" {
		t.Errorf("read through the link: %q", got)
	}
	if p := f.head("link").POSIX; p == nil || p.Symlink != "target" || p.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Errorf("symlink row: %+v", p)
	}
	if fi, err := os.Lstat(f.path("link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("lstat: %v, %v", fi, err)
	}
}

func TestFUSEReaddirPagesThroughBigDirectories(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	const n = 3000
	want := map[string]bool{}
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 { // concurrent puts share bolt's group commits
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				if _, err := f.svc.Put(f.ctx, "bkt", k, strings.NewReader(""), object.PutOptions{Size: 0}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		name := fmt.Sprintf("f%05d", i)
		want[name] = true
		keys <- "big/" + name
	}
	for _, k := range []string{"big/sub/x", "big/c", "big/c/y", "big/c-d", "big//empty", "big/./dot", "big/" + strings.Repeat("l", 256)} {
		keys <- k
	}
	close(keys)
	wg.Wait()
	for _, name := range []string{"sub", "c", "c-d"} {
		want[name] = true
	}

	// Read in small batches so the kernel asks again and again.
	d, err := os.Open(f.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := map[string]os.FileMode{}
	for {
		ents, err := d.ReadDir(100)
		for _, e := range ents {
			if _, dup := got[e.Name()]; dup {
				t.Errorf("%s listed twice", e.Name())
			}
			got[e.Name()] = e.Type()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d", len(got), len(want))
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	if got["sub"] != os.ModeDir || got["c"] != os.ModeDir || got["c-d"] != 0 {
		t.Errorf("types: sub %v, c %v (a directory wins over a file), c-d %v", got["sub"], got["c"], got["c-d"])
	}
	// stat every entry: READDIRPLUS answered them.
	ents, err := os.ReadDir(f.path("big"))
	if err != nil || len(ents) != len(want) {
		t.Fatalf("second listing: %d entries, %v", len(ents), err)
	}
	if fi, err := ents[0].Info(); err != nil || fi.Name() != "c" || !fi.IsDir() {
		t.Errorf("first entry: %v, %v", fi, err)
	}
	if slices.Contains(f.names(""), ".versions") {
		t.Error(".versions is listed in the root")
	}
}

func TestFUSEDirectories(t *testing.T) {
	f := newFUSEMount(t, fs.Options{MaxRenameKeys: 4})
	if err := os.MkdirAll(f.path("a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.write("a/b/f", []byte("f"))
	fuseWantErrno(t, "rmdir of a non-empty directory", os.Remove(f.path("a/b")), syscall.ENOTEMPTY)
	fuseWantErrno(t, "mkdir of an existing name", os.Mkdir(f.path("a"), 0o755), syscall.EEXIST)
	fuseWantErrno(t, "create of a name past NAME_MAX", os.WriteFile(f.path(strings.Repeat("n", 256)), nil, 0o644), syscall.ENAMETOOLONG)
	if err := os.Remove(f.path("a/b/f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.path("a/b")); err != nil {
		t.Fatalf("rmdir of an emptied directory: %v", err)
	}
	f.settle()
	if _, err := f.svc.Head(f.ctx, "bkt", "a/b/", ""); !meta.IsNotFound(err) {
		t.Errorf("marker after rmdir: %v", err)
	}
	if _, err := os.Stat(f.path("a/b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat after rmdir: %v", err)
	}

	// Renaming a file shares its bytes and replaces the destination.
	f.write("a/src", fuseRandom(2*fuseChunk))
	f.write("a/dst", []byte("old"))
	src := f.head("a/src")
	if err := os.Rename(f.path("a/src"), f.path("a/dst")); err != nil {
		t.Fatal(err)
	}
	if dst := f.head("a/dst"); !bytes.Equal(dst.Manifest, src.Manifest) {
		t.Error("rename copied bytes")
	}
	if _, err := os.Stat(f.path("a/src")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("source after rename: %v", err)
	}
	fuseWantErrno(t, "rename with RENAME_NOREPLACE onto an existing name",
		unix.Renameat2(unix.AT_FDCWD, f.path("a/dst"), unix.AT_FDCWD, f.path("a"), unix.RENAME_NOREPLACE), syscall.EEXIST)

	// Renaming a directory moves every key under it in one commit.
	for _, k := range []string{"tree/", "tree/1", "tree/sub/2"} {
		f.put(k, []byte(k))
	}
	if err := os.Rename(f.path("tree"), f.path("moved")); err != nil {
		t.Fatal(err)
	}
	if got := f.read("moved/sub/2"); string(got) != "tree/sub/2" {
		t.Errorf("moved file reads %q", got)
	}
	f.settle()
	if _, err := f.svc.Head(f.ctx, "bkt", "tree/1", ""); !meta.IsNotFound(err) {
		t.Errorf("old key after the rename: %v", err)
	}
	if _, err := os.Stat(f.path("tree")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old directory after the rename: %v", err)
	}
	// Past the limit: EXDEV, nothing moved.
	for i := range 5 {
		f.put(fmt.Sprintf("wide/%d", i), nil)
	}
	fuseWantErrno(t, "rename of a directory past the limit", os.Rename(f.path("wide"), f.path("wide2")), syscall.EXDEV)
	if n := len(f.names("wide")); n != 5 {
		t.Errorf("%d entries left after a refused rename, want 5", n)
	}
	// Onto a non-empty directory: ENOTEMPTY.
	// (os.Rename refuses directory targets itself.)
	fuseWantErrno(t, "rename onto a non-empty directory", syscall.Rename(f.path("moved"), f.path("wide")), syscall.ENOTEMPTY)
}

func TestFUSEVersionsDirectory(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	bodies := [][]byte{[]byte("one"), fuseRandom(3 * fuseChunk), []byte("three")}
	if err := os.Mkdir(f.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		f.write("dir/file", b)
	}
	if err := os.Remove(f.path("dir/file")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.path("dir/file")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unlinked file: %v", err)
	}

	vs := f.versions("dir/file")
	if len(vs) != 4 || !vs[0].DeleteMarker {
		t.Fatalf("%d versions, latest a marker: %v", len(vs), len(vs) > 0 && vs[0].DeleteMarker)
	}
	var want []string
	for _, v := range vs {
		name := v.LastModified().Format("2006-01-02T15:04:05.000000000Z")
		if v.DeleteMarker {
			name += ".deleted"
		}
		want = append(want, name)
	}
	if got := f.names(".versions/dir/file"); !slices.Equal(got, want) {
		t.Errorf(".versions/dir/file lists %q, want %q (ListVersions order)", got, want)
	}
	for i, v := range vs[1:] {
		if got := f.read(".versions/dir/file/" + want[i+1]); !bytes.Equal(got, bodies[len(bodies)-1-i]) {
			t.Errorf("version %s: bytes differ", want[i+1])
		}
		if fi, err := os.Stat(f.path(".versions/dir/file/" + want[i+1])); err != nil || fi.Mode().Perm()&0o222 != 0 || fi.Size() != v.Size {
			t.Errorf("version file: %v, %v", fi, err)
		}
	}
	if got := f.read(".versions/dir/file/" + want[0]); len(got) != 0 {
		t.Errorf("a delete marker reads %q", got)
	}

	// A directory's versions list every name that ever existed in it.
	f.write("dir/alive", []byte("x"))
	if got := f.names(".versions/dir"); !slices.Equal(got, []string{"alive", "file"}) {
		t.Errorf(".versions/dir lists %q", got)
	}
	if got := f.names(".versions"); !slices.Equal(got, []string{"dir"}) {
		t.Errorf(".versions lists %q", got)
	}

	// Nothing under .versions can be changed.
	version := f.path(".versions/dir/file/" + want[1])
	fuseWantErrno(t, "write a version", os.WriteFile(version, []byte("x"), 0o644), syscall.EROFS)
	fuseWantErrno(t, "create under .versions", os.WriteFile(f.path(".versions/dir/new"), nil, 0o644), syscall.EROFS)
	fuseWantErrno(t, "unlink a version", os.Remove(version), syscall.EROFS)
	fuseWantErrno(t, "mkdir under .versions", os.Mkdir(f.path(".versions/dir/d"), 0o755), syscall.EROFS)
	fuseWantErrno(t, "chmod a version", os.Chmod(version, 0o777), syscall.EROFS)
	fuseWantErrno(t, "rename out of .versions", os.Rename(version, f.path("restored")), syscall.EROFS)
	fuseWantErrno(t, "rmdir .versions", os.Remove(f.path(".versions")), syscall.EROFS)
}

func TestFUSESeesChangesFromOutsideAtOnce(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	if _, err := os.Stat(f.path("dir/k")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	f.write("other", []byte("x")) // the root's listing and attributes are cached now
	f.put("dir/k", []byte("first"))
	fuseEventually(t, "a put from outside", func() error {
		b, err := os.ReadFile(f.path("dir/k"))
		if err == nil && string(b) != "first" {
			err = fmt.Errorf("read %q", b)
		}
		return err
	})
	f.put("dir/k", []byte("second, longer"))
	fuseEventually(t, "an overwrite from outside", func() error {
		b, err := os.ReadFile(f.path("dir/k"))
		if err == nil && string(b) != "second, longer" {
			err = fmt.Errorf("read %q", b)
		}
		return err
	})
	if _, err := f.svc.Delete(f.ctx, "bkt", "dir/k", object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fuseEventually(t, "a delete from outside", func() error {
		if _, err := os.Stat(f.path("dir/k")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat: %v", err)
		}
		return nil
	})
}

func TestFUSEOpenHandleKeepsItsVersion(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	old := fuseRandom(3 * fuseChunk)
	f.write("k", old)
	file, err := os.Open(f.path("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	p := make([]byte, 1000)
	if _, err := file.ReadAt(p, 0); err != nil || !bytes.Equal(p, old[:1000]) {
		t.Fatalf("first read: %v", err)
	}
	f.put("k", []byte("replaced from outside"))
	f.write("tmp", fuseRandom(fuseChunk))
	if err := os.Rename(f.path("tmp"), f.path("k")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(file, 0, 1<<30))
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("the open handle read %d bytes (%v), want its version's %d", len(got), err, len(old))
	}
}

// TestFUSEVersionsOfOneInodeShareNoPages: a file rewritten in the mount
// keeps its inode, and the kernel one page cache per inode. A handle
// opened before the rewrite keeps reading the old version; neither its
// reads nor the writer's writes may put bytes in the cache that a handle
// of another version then reads.
func TestFUSEVersionsOfOneInodeShareNoPages(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	v1, v2, v3 := fuseRandom(3*fuseChunk), fuseRandom(3*fuseChunk), fuseRandom(3*fuseChunk)
	f.write("k", v1)
	open := func() *os.File {
		h, err := os.Open(f.path("k"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	check := func(h *os.File, want []byte, what string) {
		t.Helper()
		got, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<30))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s read %d bytes (%v), not its version's", what, len(got), err)
		}
	}
	a := open()
	f.write("k", v2)
	check(a, v1, "the handle opened before the rewrite")
	b := open()
	check(a, v1, "the handle opened before the rewrite, again")
	check(b, v2, "the handle opened after the rewrite")

	// A writer while a and b are open: its bytes are no version yet.
	w, err := os.OpenFile(f.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(v3, 0); err != nil {
		t.Fatal(err)
	}
	check(a, v1, "the handle of the first version, during a write")
	check(b, v2, "the handle of the second version, during a write")
	check(w, v3, "the writer")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(), v3, "a handle opened after the writer's close")
	a.Close()
	b.Close()
	check(open(), v3, "a handle opened once the older ones were closed")
}

// TestFUSEReaderClosedDuringARewrite: a handle opened before a rewrite
// reads its version into the page cache while the writer, which reads
// and writes past the cache, rewrites the file, and is closed first. The
// writer's bytes never went through the cache, so its close cannot vouch
// for what the cache holds: a handle opened afterwards reads the new
// version, not the pages the old handle left.
func TestFUSEReaderClosedDuringARewrite(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	v1, v2 := fuseRandom(3*fuseChunk), fuseRandom(3*fuseChunk)
	f.write("k", v1)
	r, err := os.Open(f.path("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(f.path("k"), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(v2); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("the handle opened before the rewrite read %d bytes (%v), not its version's", len(got), err)
	}
	r.Close()
	// The kernel releases r after close(2) has returned, in the
	// background; the mistake showed only when that came before the
	// writer's close.
	time.Sleep(50 * time.Millisecond)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.read("k"); !bytes.Equal(got, v2) {
		t.Errorf("a handle opened after the rewrite read %d bytes, not its version's (the old one's: %t)", len(got), bytes.Equal(got, v1))
	}
}

// TestFUSEHandleOpenedBeforeTheWritersRelease: the kernel sends the
// release of a written file after close(2) has returned (and not at all
// while a duplicate of the descriptor is open), so a handle opened just
// after the close may find the writer's draft still there. It must read
// the version the close committed, not share the draft with the next
// writer. The duplicate holds the release back for as long as the test
// needs.
func TestFUSEHandleOpenedBeforeTheWritersRelease(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	v1, v2 := fuseRandom(3*fuseChunk), fuseRandom(3*fuseChunk)
	w, err := os.Create(f.path("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(v1); err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := w.Close(); err != nil { // commits v1; no release yet
		t.Fatal(err)
	}
	r, err := os.Open(f.path("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f.write("k", v2)
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, v1) {
		t.Errorf("the handle opened before the rewrite read %d bytes (%v), not v1's (v2's: %t)", len(got), err, bytes.Equal(got, v2))
	}
	if got := f.read("k"); !bytes.Equal(got, v2) {
		t.Errorf("a new handle read %d bytes, not v2's", len(got))
	}
}

// TestFUSEAppendWhileAnOlderHandleReads: a handle opened before a rewrite
// reads its own, shorter version, and the kernel takes its short read for
// the end of the file, whose size it keeps one of per inode. The mount
// tells the kernel to ask for the size again, and an O_APPEND write goes
// to the end of the file whatever offset the kernel sends it with.
func TestFUSEAppendWhileAnOlderHandleReads(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	f.write("log", []byte("1\n"))
	r, err := os.Open(f.path("log"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f.write("log", []byte("1\n2\n")) // a rewrite, not an append
	if got, err := io.ReadAll(r); err != nil || string(got) != "1\n" {
		t.Fatalf("the handle opened before the rewrite read %q (%v)", got, err)
	}
	f.appendLine("log", "3\n")
	fuseEventually(t, "the size the kernel shows", func() error {
		if fi, err := os.Stat(f.path("log")); err != nil || fi.Size() != 6 {
			return fmt.Errorf("stat: %v, %v; want 6 bytes", fi.Size(), err)
		}
		return nil
	})
	if got := f.read("log"); string(got) != "1\n2\n3\n" {
		t.Errorf("the mount reads %q", got)
	}
	if got := f.stored("log"); string(got) != "1\n2\n3\n" {
		t.Errorf("the store holds %q", got)
	}
}

// TestFUSEReaderFollowsAppends: a handle that has read to the end of a
// file reads what is appended to it in the mount afterwards, as on a local
// disk; once the file is rewritten otherwise, it stays on the last
// version it followed. tail -f follows a log appended to with >>.
func TestFUSEReaderFollowsAppends(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	f.write("log", []byte("1\n"))
	r, err := os.Open(f.path("log"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := func(want string) {
		t.Helper()
		if got, err := io.ReadAll(r); err != nil || string(got) != want {
			t.Fatalf("the reader read %q (%v), want %q", got, err, want)
		}
	}
	next("1\n")
	f.appendLine("log", "2\n")
	next("2\n")
	f.appendLine("log", "3\n")
	f.appendLine("log", "4\n")
	next("3\n4\n")
	f.write("log", []byte("rewritten, longer than before\n"))
	next("")
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	next("1\n2\n3\n4\n")

	tail := fuseTool(t, "tail")
	out := filepath.Join(t.TempDir(), "out")
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	f.write("tailed", []byte("0\n"))
	cmd := exec.Command(tail, "-f", "-s", "0.05", f.path("tailed"))
	cmd.Stdout = o
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var want strings.Builder
	want.WriteString("0\n")
	fuseEventually(t, "tail -f's first line", func() error {
		if b, _ := os.ReadFile(out); string(b) != want.String() {
			return fmt.Errorf("tail -f wrote %q", b)
		}
		return nil
	})
	for i := range 50 {
		line := fmt.Sprintf("%d\n", i+1)
		f.appendLine("tailed", line)
		want.WriteString(line)
	}
	fuseEventually(t, "tail -f's lines", func() error {
		if b, _ := os.ReadFile(out); string(b) != want.String() {
			return fmt.Errorf("tail -f wrote %q, want %q", b, want.String())
		}
		return nil
	})
}

func TestFUSEFailedCommitFailsTheFsync(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	file, err := os.Create(f.path("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteBucket(f.ctx, "bkt"); err != nil { // empty: nothing committed yet
		t.Fatal(err)
	}
	fuseWantErrno(t, "fsync after the bucket was deleted", file.Sync(), syscall.EIO)
	file.Close()
	// Once released, the file that never made it is gone, not broken.
	fuseEventually(t, "stat of the file whose commit failed", func() error {
		if _, err := os.Stat(f.path("doomed")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat: %v", err)
		}
		return nil
	})
}

func TestFUSEReadOnlyMount(t *testing.T) {
	f := newFUSEMount(t, fs.Options{ReadOnly: true})
	f.put("k", []byte("x"))
	if got := f.read("k"); string(got) != "x" {
		t.Errorf("read %q", got)
	}
	fuseWantErrno(t, "write on a read-only mount", os.WriteFile(f.path("k"), []byte("y"), 0o644), syscall.EROFS)
	fuseWantErrno(t, "mkdir on a read-only mount", os.Mkdir(f.path("d"), 0o755), syscall.EROFS)
}

func TestFUSEMountPointErrors(t *testing.T) {
	svc := object.New(nil, nil, object.Options{})
	base := t.TempDir()
	file := filepath.Join(base, "file")
	full := filepath.Join(base, "full")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		filepath.Join(base, "missing"): "no such file or directory",
		file:                           "not a directory",
		full:                           "not empty",
	} {
		_, err := fs.Mount(context.Background(), svc, "bkt", dir, fs.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mount on %s: %v, want an error saying %q", dir, err, want)
		}
	}
}

// TestFUSEMatchesALocalDirectory drives the same random operations on the
// mount and on a plain directory, and compares the trees after every
// step: contents, types, permissions and the errors the operations met.
func TestFUSEMatchesALocalDirectory(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	local := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)

	dirs := []string{"", "d0", "d1", "d0/e"}
	name := func() string {
		d := dirs[rng.IntN(len(dirs))]
		return filepath.Join(d, fmt.Sprintf("f%d", rng.IntN(4)))
	}
	type op struct {
		what string
		do   func(root string) error
	}
	for step := range 250 {
		var o op
		switch k := rng.IntN(10); k {
		case 0, 1:
			p, b := name(), fuseRandom(rng.IntN(3*fuseChunk))
			o = op{"write " + p, func(root string) error { return os.WriteFile(filepath.Join(root, p), b, 0o644) }}
		case 2:
			p, off, b := name(), rng.Int64N(2*fuseChunk), fuseRandom(rng.IntN(5000)+1)
			o = op{fmt.Sprintf("pwrite %s at %d", p, off), func(root string) error {
				file, err := os.OpenFile(filepath.Join(root, p), os.O_RDWR, 0)
				if err != nil {
					return err
				}
				_, err = file.WriteAt(b, off)
				return errors.Join(err, file.Close())
			}}
		case 3:
			p, b := name(), fuseRandom(rng.IntN(100))
			o = op{"append " + p, func(root string) error {
				file, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					return err
				}
				_, err = file.Write(b)
				return errors.Join(err, file.Close())
			}}
		case 4:
			p, size := name(), rng.Int64N(3*fuseChunk)
			o = op{fmt.Sprintf("truncate %s to %d", p, size), func(root string) error { return os.Truncate(filepath.Join(root, p), size) }}
		case 5:
			a, b := name(), name()
			o = op{"rename " + a + " " + b, func(root string) error { return syscall.Rename(filepath.Join(root, a), filepath.Join(root, b)) }}
		case 6:
			p := name()
			o = op{"unlink " + p, func(root string) error { return os.Remove(filepath.Join(root, p)) }}
		case 7:
			d := dirs[1+rng.IntN(len(dirs)-1)]
			o = op{"mkdir " + d, func(root string) error { return os.Mkdir(filepath.Join(root, d), 0o755) }}
		case 8:
			d := dirs[1+rng.IntN(len(dirs)-1)]
			o = op{"rmdir " + d, func(root string) error { return syscall.Rmdir(filepath.Join(root, d)) }}
		case 9:
			a, b := dirs[1+rng.IntN(len(dirs)-1)], dirs[1+rng.IntN(len(dirs)-1)]
			o = op{"rename directory " + a + " " + b, func(root string) error {
				return syscall.Rename(filepath.Join(root, a), filepath.Join(root, b))
			}}
		}
		want, got := o.do(local), o.do(f.dir)
		if !sameErrno(want, got) {
			t.Fatalf("step %d, %s: mount says %v, a local directory %v", step, o.what, got, want)
		}
		if diff := compareTrees(local, f.dir); diff != "" {
			t.Fatalf("step %d, after %s: %s", step, o.what, diff)
		}
	}
}

// sameErrno reports whether two operations failed the same way.
func sameErrno(a, b error) bool {
	var ea, eb syscall.Errno
	errors.As(a, &ea)
	errors.As(b, &eb)
	return (a == nil) == (b == nil) && ea == eb
}

// compareTrees describes the first difference between two trees, or
// returns "".
func compareTrees(want, got string) string {
	w, err := describeTree(want)
	if err != nil {
		return err.Error()
	}
	g, err := describeTree(got)
	if err != nil {
		return err.Error()
	}
	return diffTrees(w, g)
}

// describeTree walks the tree under root: path → type and permissions,
// and the bytes' length and MD5 of a file or the target of a symlink.
func describeTree(root string) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %d bytes md5 %x", len(b), md5.Sum(b))
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		m[rel] = desc
		return nil
	})
	return m, err
}

// diffTrees describes the first difference between two trees described
// by describeTree, or returns "".
func diffTrees(w, g map[string]string) string {
	for _, p := range slices.Sorted(maps.Keys(w)) {
		if w[p] != g[p] {
			return fmt.Sprintf("%s: mount has %q, want %q", p, g[p], w[p])
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			return fmt.Sprintf("%s: in the mount only (%s)", p, g[p])
		}
	}
	return ""
}

// TestFUSEConcurrentWritersAndReaders writes different files from several
// goroutines while others list the directory and read what is there.
func TestFUSEConcurrentWritersAndReaders(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	if err := os.Mkdir(f.path("c"), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := map[string][]byte{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				name := fmt.Sprintf("c/w%d-%d", w, i%5)
				b := fuseRandom(rand.IntN(2 * fuseChunk))
				if err := os.WriteFile(f.path(name), b, 0o644); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[name] = b
				mu.Unlock()
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ents, err := os.ReadDir(f.path("c"))
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range ents {
					// A file may be mid-rewrite: any complete version will do.
					if _, err := os.ReadFile(f.path("c/" + e.Name())); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	for name, b := range want {
		if got := f.read(name); !bytes.Equal(got, b) {
			t.Errorf("%s: mount reads %d bytes, want the last written %d", name, len(got), len(b))
		}
		if got := f.stored(name); !bytes.Equal(got, b) {
			t.Errorf("%s: stored bytes differ", name)
		}
	}
}

// TestFUSETarExtract extracts a tarball into the mount: the tree matches,
// modes and mtimes included, and each file is exactly one version.
func TestFUSETarExtract(t *testing.T) {
	tar, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar here")
	}
	f := newFUSEMount(t, fs.Options{})
	src := filepath.Join(t.TempDir(), "src")
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	files := map[string][]byte{"a.txt": []byte("hello\n"), "sub/big.bin": fuseRandom(3*fuseChunk + 5), "sub/deeper/x": nil}
	for name, b := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a.txt", filepath.Join(src, "sub/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "sub"), 0o751); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "src.tar")
	for _, args := range [][]string{{"-cf", archive, "-C", filepath.Dir(src), "src"}, {"-xpf", archive, "-C", f.dir}} {
		if out, err := exec.Command(tar, args...).CombinedOutput(); err != nil {
			t.Fatalf("tar %q: %v\n%s", args, err, out)
		}
	}
	if diff := compareTrees(src, f.path("src")); diff != "" {
		t.Fatal(diff)
	}
	for name := range files {
		fi, err := os.Stat(f.path("src/" + name))
		if err != nil || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s: mtime %v, %v; want %v", name, fi.ModTime(), err, mtime)
		}
		if n := len(f.versions("src/" + name)); n != 1 {
			t.Errorf("%s: %d versions, want 1", name, n)
		}
	}
}
