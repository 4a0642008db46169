package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/object"
)

// A MountPoint is a bucket mounted on a directory.
type MountPoint struct {
	Dir    string
	server *fuse.Server
	done   chan struct{}
}

// Mount mounts bucket on dir, an existing empty directory, and serves it
// until it is unmounted (by Unmount, or by umount(8)). As root it mounts
// the file system itself; otherwise through fusermount3.
func Mount(ctx context.Context, svc *object.Service, bucket, dir string, o Options) (*MountPoint, error) {
	if err := checkMountpoint(dir); err != nil {
		return nil, err
	}
	if err := checkUnprivileged(o); err != nil {
		return nil, err
	}
	if _, err := svc.Bucket(ctx, bucket); err != nil {
		return nil, err
	}
	if o.StagingDir == "" {
		return nil, errors.New("mount: no staging directory given")
	}
	if err := os.MkdirAll(o.StagingDir, 0o700); err != nil {
		return nil, fmt.Errorf("staging directory: %w", err)
	}
	f := &fsys{svc: svc, bucket: bucket, opts: o, log: o.Logger, start: time.Now(), streams: make(chan struct{}, maxStreams)}
	if f.log == nil {
		f.log = slog.Default()
	}
	root := f.newRoot()
	q := newInvalidator(root.EmbeddedInode())
	f.invalid = q.add
	f.j = newJournal(svc, bucket, f.log, &f.own, q.failed)
	// The pages read ahead learn of every commit, the mount's own too,
	// from before the kernel can ask for the first of them.
	cancelAhead := svc.Watch(func(c object.Change) {
		if c.Bucket == bucket {
			f.ahead.changed(c.Key)
		}
	})
	server, err := fusefs.Mount(dir, root, f.fuseOptions())
	if err != nil {
		f.j.close()
		cancelAhead()
		q.close()
		return nil, fmt.Errorf("mount %s on %s: %w", bucket, dir, err)
	}
	if err := setReadahead(dir); err != nil {
		f.log.Debug("stratafs: kernel readahead left at its default", "err", err)
	}
	cancel := svc.Watch(f.watch(q))
	m := &MountPoint{Dir: dir, server: server, done: make(chan struct{})}
	go func() {
		server.Wait()
		// Nothing can be changed any more: commit what is queued.
		f.j.close()
		cancel()
		cancelAhead()
		q.close()
		close(m.done)
	}()
	return m, nil
}

func (f *fsys) fuseOptions() *fusefs.Options {
	entry, attr := f.opts.EntryTimeout, f.opts.AttrTimeout
	mo := fuse.MountOptions{
		FsName:     "stratafs:" + f.bucket,
		Name:       "stratafs",
		AllowOther: f.opts.AllowOther,
		// The kernel checks permissions against the modes we report.
		Options: []string{"default_permissions"},
		// As root there is no need for fusermount.
		DirectMount: os.Geteuid() == 0,
		// Bigger writes, fewer requests (the kernel's default limit).
		MaxWrite: 1 << 20,
		// open(O_TRUNC) arrives as one OPEN rather than a SETATTR first,
		// so rewriting a file makes one version, not two.
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
	}
	if f.opts.ReadOnly || !f.opts.AsOf.IsZero() {
		mo.Options = append(mo.Options, "ro")
	}
	return &fusefs.Options{
		MountOptions:    mo,
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &entry,
		// The modes and owners we report are meant: chmod 000 is 000.
		NullPermissions: true,
	}
}

// checkMountpoint explains why dir cannot be mounted on.
func checkMountpoint(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("mount point %s: a dead mount is still there: umount it first: %w", dir, err)
	case err != nil:
		return fmt.Errorf("mount point: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	parent, err := os.Stat(filepath.Join(dir, ".."))
	if err == nil && parent.Sys().(*syscall.Stat_t).Dev != fi.Sys().(*syscall.Stat_t).Dev {
		return fmt.Errorf("mount point %s is busy: something is mounted there already", dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("mount point %s is not empty", dir)
	}
	return nil
}

// fuseConf is fusermount3's configuration: user_allow_other there lets
// users other than root mount with allow_other.
const fuseConf = "/etc/fuse.conf"

// checkUnprivileged explains what a user other than root lacks to mount,
// before fusermount3 fails with a bare exit code (it says why on the
// standard error, which a service may not show).
func checkUnprivileged(o Options) error {
	if os.Geteuid() == 0 {
		return nil
	}
	if !slices.ContainsFunc([]string{"fusermount3", "/bin/fusermount3", "fusermount", "/bin/fusermount"}, func(bin string) bool {
		_, err := exec.LookPath(bin)
		return err == nil
	}) {
		return errors.New("mount as a user other than root: fusermount3 is not installed (Debian: apt install fuse3)")
	}
	if o.AllowOther && !userAllowOther() {
		return fmt.Errorf("mount with allow_other as a user other than root: %s lacks a line user_allow_other", fuseConf)
	}
	return nil
}

// userAllowOther reports whether fuseConf has a line user_allow_other.
func userAllowOther() bool {
	b, err := os.ReadFile(fuseConf)
	return err == nil && slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
		return strings.TrimSpace(l) == "user_allow_other"
	})
}

// Unmount unmounts the bucket and waits until serving has stopped and
// every change made in the mount has been committed. It fails, changing
// nothing, while files in the mount are in use.
func (m *MountPoint) Unmount() error {
	if os.Geteuid() == 0 {
		// go-fuse would fall back to fusermount and report its failure
		// rather than the kernel's answer.
		err := syscall.Unmount(m.Dir, 0)
		switch {
		case err == nil:
			<-m.done
			return nil
		case errors.Is(err, syscall.EBUSY):
			return fmt.Errorf("unmount %s: %w: files in it are in use", m.Dir, err)
		}
	}
	if err := m.server.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", m.Dir, err)
	}
	<-m.done
	return nil
}

// Done is closed once the bucket is unmounted, whoever unmounted it, and
// every change made in the mount has been committed.
func (m *MountPoint) Done() <-chan struct{} { return m.done }
