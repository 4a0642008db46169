package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// The mount commits closes, unlinks, renames, mkdirs and attribute
// changes behind the calls that make them (fs's journal). These tests
// check its promises: the mount shows its own queued changes; a change
// whose commit fails is logged and fails the file's next close or fsync;
// after fsync returns the version is in the store, whatever happens to
// the process next; after an unmount every change is.

// noCache makes the kernel ask the mount about every name and attribute,
// so that what a test sees is what the mount answers.
const noCache = time.Nanosecond

// A heldStore is a meta store whose commits can be held back or failed.
type heldStore struct {
	meta.Store

	mu   sync.Mutex
	held chan struct{} // while not nil, commits wait for it to be closed
	fail error         // while not nil, commits fail with it
	// entered receives a value, if there is room, as a commit starts
	// waiting.
	entered chan struct{}
}

func (s *heldStore) Commit(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	s.mu.Lock()
	held, fail := s.held, s.fail
	s.mu.Unlock()
	if held != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-held
	}
	if fail != nil {
		return fail
	}
	return s.Store.Commit(ctx, b, ms...)
}

// hold holds commits back until release is called.
func (s *heldStore) hold() (release func()) {
	held := make(chan struct{})
	s.mu.Lock()
	s.held = held
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.held = nil
		s.mu.Unlock()
		close(held)
	}
}

// failWith makes commits fail with err; nil lets them through again.
func (s *heldStore) failWith(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (f *fuseMount) absent(key string) {
	f.t.Helper()
	if _, err := f.svc.Head(f.ctx, "bkt", key, ""); !meta.IsNotFound(err) {
		f.t.Errorf("%s is in the store already: %v", key, err)
	}
}

func TestFUSEShowsItsQueuedChanges(t *testing.T) {
	h := &heldStore{entered: make(chan struct{}, 1)}
	f := newFUSEMountOver(t, fs.Options{EntryTimeout: noCache, AttrTimeout: noCache}, func(m meta.Store) meta.Store {
		h.Store = m
		return h
	})
	f.write("old", []byte("moved"))
	f.write("gone", []byte("unlinked"))
	f.settle()

	release := h.hold()
	f.write("new", []byte("queued"))
	<-h.entered // new is being committed: what follows waits in the queue
	if err := os.Chmod(f.path("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.path("old"), f.path("renamed")); err != nil {
		t.Fatal(err)
	}
	f.write("folded", []byte("x"))
	if err := os.Chmod(f.path("folded"), 0o604); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.path("d"), 0o750); err != nil {
		t.Fatal(err)
	}
	f.write("d/inner", []byte("in a new directory"))
	if err := os.Remove(f.path("gone")); err != nil {
		t.Fatal(err)
	}
	// None of it is committed, all of it is shown.
	for _, k := range []string{"new", "renamed", "d/", "d/inner"} {
		f.absent(k)
	}
	for name, want := range map[string]string{"new": "queued", "renamed": "moved", "d/inner": "in a new directory"} {
		if got := f.read(name); string(got) != want {
			t.Errorf("%s reads %q, want %q", name, got, want)
		}
	}
	if fi, err := os.Stat(f.path("new")); err != nil || fi.Mode() != 0o600 || fi.Size() != 6 {
		t.Errorf("stat new: %v, %v", fi, err)
	}
	if fi, err := os.Stat(f.path("d")); err != nil || fi.Mode() != os.ModeDir|0o750 {
		t.Errorf("stat d: %v, %v", fi, err)
	}
	// A listing waits for the changes under it: it reads the store.
	listed := make(chan []string)
	go func() {
		names, _ := os.ReadDir(f.dir)
		var l []string
		for _, e := range names {
			l = append(l, e.Name())
		}
		listed <- l
	}()
	select {
	case l := <-listed:
		t.Fatalf("listed %q while the changes were held back", l)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if l := <-listed; !slices.Equal(l, []string{"d", "folded", "new", "renamed"}) {
		t.Errorf("root lists %q", l)
	}
	if _, err := os.Stat(f.path("gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the unlinked file: %v", err)
	}
	if p := f.head("new").POSIX; p.Mode != syscall.S_IFREG|0o600 {
		t.Errorf("new's mode in the store: %o", p.Mode)
	}
	// The write of new was being committed (held) when the chmod came:
	// two versions. That of folded waited in the queue: the chmod joined
	// it.
	if n := len(f.versions("new")); n != 2 {
		t.Errorf("new has %d versions, want 2", n)
	}
	if vs := f.versions("folded"); len(vs) != 1 || vs[0].POSIX.Mode != syscall.S_IFREG|0o604 {
		t.Errorf("folded has %d versions, want 1 with mode 0604", len(vs))
	}
	if got := f.stored("renamed"); string(got) != "moved" {
		t.Errorf("renamed holds %q", got)
	}
}

// syncBuffer is a log sink safe for the mount's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newHeldMount mounts over a heldStore, uncached, logging to a buffer.
func newHeldMount(t *testing.T) (*fuseMount, *heldStore, *syncBuffer) {
	h := &heldStore{}
	log := &syncBuffer{}
	f := newFUSEMountOver(t, fs.Options{EntryTimeout: noCache, AttrTimeout: noCache, Logger: slog.New(slog.NewTextHandler(log, nil))},
		func(m meta.Store) meta.Store {
			h.Store = m
			return h
		})
	return f, h, log
}

func TestFUSEFailedQueuedCommitsFailTheNextCloseOrFsync(t *testing.T) {
	f, h, log := newHeldMount(t)
	f.write("kept", []byte("committed"))
	f.settle()
	h.failWith(errors.New("the disk is on fire"))

	// The close succeeds: the commit is queued (and held here, so that it
	// cannot fail before the close returns). fsync, on any handle, waits
	// for it and reports its failure, once.
	release := h.hold()
	f.write("kept", []byte("lost"))
	file, err := os.Open(f.path("kept"))
	if err != nil {
		t.Fatal(err)
	}
	release()
	fuseWantErrno(t, "fsync after a failed commit", file.Sync(), syscall.EIO)
	if err := file.Sync(); err != nil {
		t.Errorf("second fsync: %v, want the failure reported once", err)
	}
	file.Close()
	if !strings.Contains(log.String(), "the disk is on fire") {
		t.Errorf("the failure was not logged: %q", log.String())
	}
	// The mount shows what the store has again, once the kernel has let
	// go of the handles (it releases them after close returns).
	fuseEventually(t, "the store's version after the failure", func() error {
		if got, err := os.ReadFile(f.path("kept")); err != nil || string(got) != "committed" {
			return fmt.Errorf("kept reads %q, %v", got, err)
		}
		return nil
	})

	// The next close of the file reports a failure too.
	release = h.hold()
	f.write("kept", []byte("lost again"))
	release()
	f.settle()
	release = h.hold()
	file, err = os.OpenFile(f.path("kept"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	fuseWantErrno(t, "close after a failed commit", file.Close(), syscall.EIO)
	release()

	// A new file whose commit failed is gone, once the kernel has let go
	// of its handle: until then the inode answers for its draft (CI saw
	// the stat below come before the release).
	release = h.hold()
	f.write("fresh", []byte("never stored"))
	release()
	f.settle()
	fuseEventually(t, "stat of a new file whose commit failed", func() error {
		if _, err := os.Stat(f.path("fresh")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat: %v, want ENOENT", err)
		}
		return nil
	})

	// The append above failed too: reported by the next fsync.
	h.failWith(nil)
	file, err = os.Open(f.path("kept"))
	if err != nil {
		t.Fatal(err)
	}
	fuseWantErrno(t, "fsync after the failed append", file.Sync(), syscall.EIO)
	file.Close()
	f.write("kept", []byte("finally"))
	if got := f.stored("kept"); string(got) != "finally" {
		t.Errorf("kept holds %q once commits work again", got)
	}
}

// mountProcess is `stratafs mount` running in its own process.
type mountProcess struct {
	cmd *exec.Cmd
	dir string
}

// startMount runs `stratafs mount [flags] bkt dir` on dataDir and waits
// until it serves.
func startMount(t *testing.T, bin, dataDir, dir string, flags ...string) *mountProcess {
	t.Helper()
	args := append(append([]string{"--data-dir", dataDir, "mount"}, flags...), "bkt", dir)
	p := &mountProcess{cmd: exec.Command(bin, args...), dir: dir}
	runUntilMounted(t, p.cmd, "mounted bucket bkt", p.kill)
	return p
}

// runUntilMounted starts cmd, a `stratafs mount`, and returns once its
// first line of output starts with want. stop is registered with t as
// soon as the process runs, so that a mount that fails leaves nothing
// behind.
func runUntilMounted(t *testing.T, cmd *exec.Cmd, want string, stop func()) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, want) {
		t.Fatalf("stratafs mount printed %q (%v) and stopped", line, err)
	}
	go io.Copy(io.Discard, out)
}

// kill kills the process, as a crash would, and detaches the dead mount.
func (p *mountProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	syscall.Unmount(p.dir, syscall.MNT_DETACH)
}

// TestFUSEDurability runs `stratafs mount` in a process of its own, then
// looks into the store after the process is gone: a version whose fsync
// returned is there even when the process was killed right after; after
// SIGTERM, which unmounts, every change made in the mount is there,
// changes only closed included.
func TestFUSEDurability(t *testing.T) {
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildStratafs(t)
	data := t.TempDir()
	stratafs(t, bin, data, "bucket", "create", "bkt")
	stratafs(t, bin, data, "bucket", "versioning", "bkt", "enabled")
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string, sync bool) {
		t.Helper()
		file, err := os.Create(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteString(body); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := file.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// inStore opens the store the dead process left and calls check.
	inStore := func(check func(svc *object.Service)) {
		t.Helper()
		svc, closeAll, err := backend.Open(backend.Config{Dir: data}, object.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAll()
		check(svc)
	}
	read := func(svc *object.Service, key string) (string, error) {
		obj, err := svc.Get(context.Background(), "bkt", key, "", 0, -1)
		if err != nil {
			return "", err
		}
		defer obj.Body.Close()
		b, err := io.ReadAll(obj.Body)
		return string(b), err
	}

	p := startMount(t, bin, data, mnt)
	for i := range 20 {
		write(fmt.Sprintf("closed-%d", i), "maybe", false)
	}
	write("synced", "durable", true)
	p.kill()
	inStore(func(svc *object.Service) {
		if got, err := read(svc, "synced"); err != nil || got != "durable" {
			t.Errorf("after fsync and a kill the store holds %q, %v", got, err)
		}
	})

	p = startMount(t, bin, data, mnt)
	if err := os.Mkdir(filepath.Join(mnt, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		write(fmt.Sprintf("dir/f%02d", i), fmt.Sprint(i), false)
	}
	if err := os.Rename(filepath.Join(mnt, "synced"), filepath.Join(mnt, "dir/moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "dir/f00")); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("stratafs mount exited with %v after SIGTERM", err)
	}
	inStore(func(svc *object.Service) {
		res, err := svc.List(context.Background(), "bkt", meta.ListOptions{Prefix: "dir/"})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, v := range res.Objects {
			keys = append(keys, v.Key)
		}
		want := []string{"dir/"}
		for i := 1; i < 50; i++ {
			want = append(want, fmt.Sprintf("dir/f%02d", i))
		}
		want = append(want, "dir/moved")
		if !slices.Equal(keys, want) {
			t.Errorf("after SIGTERM dir/ holds %q, want %q", keys, want)
		}
		if got, err := read(svc, "dir/f49"); err != nil || got != "49" {
			t.Errorf("dir/f49 holds %q, %v", got, err)
		}
		if _, err := read(svc, "synced"); !meta.IsNotFound(err) {
			t.Errorf("the rename's source after SIGTERM: %v", err)
		}
	})
}

// TestFUSEListsFilesBeingWritten lists files created in the mount and not
// closed yet: they have no key in the store, but they are there.
func TestFUSEListsFilesBeingWritten(t *testing.T) {
	f := newFUSEMount(t, fs.Options{EntryTimeout: noCache, AttrTimeout: noCache})
	if err := os.Mkdir(f.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.write("d/closed", []byte("x"))
	var open []*os.File
	for _, name := range []string{"d/written", "d/empty"} {
		file, err := os.Create(f.path(name))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		open = append(open, file)
	}
	if _, err := open[0].Write([]byte("streaming")); err != nil {
		t.Fatal(err)
	}
	if got := f.names("d"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"closed", "empty", "written"}) {
		t.Errorf("d lists %q", got)
	}
	fuseWantErrno(t, "rmdir of a directory with a file being written", syscall.Rmdir(f.path("d")), syscall.ENOTEMPTY)
	for _, file := range open {
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Closed, each is listed once.
	if got := f.names("d"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"closed", "empty", "written"}) {
		t.Errorf("after the closes d lists %q", got)
	}
}

// TestFUSEChangeAnUnlinkedFile changes the attributes of a file open for
// reading after its name is gone: as on a local disk the calls succeed
// and the descriptor shows them, and nothing is written, since the file
// has no key. Before, the mount queued a new version of the old key,
// which failed to commit (logged, and EIO from the next fsync) and in a
// suspended bucket, whose unlink removed the file's null version, fchmod
// itself failed with ENOENT.
func TestFUSEChangeAnUnlinkedFile(t *testing.T) {
	for _, state := range []meta.Versioning{meta.Enabled, meta.Suspended} {
		t.Run(state.String(), func(t *testing.T) {
			f := newFUSEMount(t, fs.Options{})
			if _, err := f.svc.SetVersioning(f.ctx, "bkt", state); err != nil {
				t.Fatal(err)
			}
			f.write("u", []byte("bytes"))
			fd, err := os.Open(f.path("u"))
			if err != nil {
				t.Fatal(err)
			}
			defer fd.Close()
			if err := os.Remove(f.path("u")); err != nil {
				t.Fatal(err)
			}
			before := len(f.versions("u")) // settled: the unlink is committed
			if err := fd.Chmod(0o600); err != nil {
				t.Errorf("fchmod: %v", err)
			}
			mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd.Fd()), ts, 0); err != nil {
				t.Errorf("futimens: %v", err)
			}
			if fi, err := fd.Stat(); err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mtime) {
				t.Errorf("fstat: %v %v %v, want mode 0600, mtime %v", fi.Mode(), fi.ModTime(), err, mtime)
			}
			if err := fd.Sync(); err != nil {
				t.Errorf("fsync: %v", err)
			}
			if b, err := io.ReadAll(fd); err != nil || string(b) != "bytes" {
				t.Errorf("read %q, %v", b, err)
			}
			if n := len(f.versions("u")); n != before {
				t.Errorf("%d versions of u after the changes, %d before", n, before)
			}
			f.absent("u")
		})
	}
}

// TestFUSEQueuedCommitsOutlastAnOutage: while the store refuses commits
// for a reason that passes (it cannot be reached, its disk is full), a
// file closed in the mount stays queued and shown; fsync of it or of
// the mount answers the store's errno at once instead of waiting; and
// once the store takes commits again, the file is committed.
func TestFUSEQueuedCommitsOutlastAnOutage(t *testing.T) {
	f, h, log := newHeldMount(t)
	d, err := os.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close() // before the unmount: a test that fails must not hang it
	for i, c := range []struct {
		err   error
		errno syscall.Errno
	}{
		{fmt.Errorf("commit: no host answered: %w", meta.ErrUnavailable), syscall.EIO},
		{fmt.Errorf("commit: %w", &os.PathError{Op: "write", Path: "meta.db", Err: syscall.ENOSPC}), syscall.ENOSPC},
	} {
		name := fmt.Sprintf("during%d", i)
		h.failWith(c.err)
		f.write(name, []byte("closed while the store refused it"))
		file, err := os.Open(f.path(name))
		if err != nil {
			t.Fatal(err)
		}
		fuseWantErrno(t, name+": fsync while the store refuses commits", file.Sync(), c.errno)
		file.Close()
		fuseWantErrno(t, name+": fsync of the mount while the store refuses commits", d.Sync(), c.errno)
		if got := f.read(name); string(got) != "closed while the store refused it" {
			t.Errorf("%s: the mount reads %q while its commit waits", name, got)
		}
		f.absent(name)

		h.failWith(nil)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if err := d.Sync(); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: fsync of the mount a minute after the store is back: %v", name, err)
			}
		}
		if got := f.committed(name); string(got) != "closed while the store refused it" {
			t.Errorf("%s: the store holds %q once it takes commits again", name, got)
		}
	}
	for _, want := range []string{"trying again until it takes it", "takes commits again"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q: %s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "commit failed") {
		t.Errorf("a commit that outlasted the outage was reported as failed: %s", log.String())
	}
}
