package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/object"
)

// runMount mounts a bucket in the foreground until SIGINT or SIGTERM,
// then unmounts it, waiting for open files to be closed; it returns once
// every change made in the mount is committed. With --as-of it mounts the
// bucket as it was at an instant, read-only.
func runMount(ctx context.Context, e *env, args []string) error {
	fl := flag.NewFlagSet("mount", flag.ContinueOnError)
	options := mountFlags(fl)
	asOf := fl.String("as-of", "", "mount the bucket read-only as it was at this RFC 3339 instant")
	pos, err := e.parse(fl, args, 2, 2)
	if err != nil {
		return err
	}
	o, err := options(e)
	if err != nil {
		return err
	}
	if *asOf != "" {
		if o.AsOf, err = parseTime(*asOf); err != nil {
			return fmt.Errorf("--as-of: %w", err)
		}
	}
	svc, closeAll, err := openService(e, nil)
	if err != nil {
		return err
	}
	defer closeAll()
	m, err := mountBucket(ctx, e, svc, pos[0], pos[1], o)
	if err != nil {
		return err
	}
	select {
	case <-m.Done(): // unmounted with umount(8)
		return nil
	case <-ctx.Done():
	}
	unmount(e, m)
	return nil
}

// mountFlags registers the options of a mount on fl (stratafs mount and
// serve --mount share them); the function it returns builds them once fl
// is parsed.
func mountFlags(fl *flag.FlagSet) func(*env) (fs.Options, error) {
	readOnly := fl.Bool("read-only", false, "mount read-only")
	allowOther := fl.Bool("allow-other", false, "let other users use the mount (permissions are checked against file modes)")
	uid := fl.Uint("uid", uint(os.Getuid()), "owner of keys that carry no POSIX attributes")
	gid := fl.Uint("gid", uint(os.Getgid()), "group of keys that carry no POSIX attributes")
	umask := fl.String("umask", "022", "octal umask for keys that carry no POSIX attributes")
	attrTimeout := fl.Duration("attr-timeout", time.Second, "how long the kernel caches attributes")
	entryTimeout := fl.Duration("entry-timeout", time.Second, "how long the kernel caches names")
	return func(e *env) (fs.Options, error) {
		mask, err := strconv.ParseUint(*umask, 8, 32)
		if err != nil || mask > 0o777 {
			return fs.Options{}, fmt.Errorf("--umask %q is not an octal mode: %w", *umask, errUsage)
		}
		return fs.Options{
			StagingDir:   filepath.Join(e.dataDir, "staging"),
			ReadOnly:     *readOnly,
			AllowOther:   *allowOther,
			UID:          uint32(*uid),
			GID:          uint32(*gid),
			Umask:        uint32(mask),
			AttrTimeout:  *attrTimeout,
			EntryTimeout: *entryTimeout,
			Logger:       slog.New(slog.NewTextHandler(e.stderr, nil)),
		}, nil
	}
}

// mountBucket mounts bucket on dir and says so.
func mountBucket(ctx context.Context, e *env, svc *object.Service, bucket, dir string, o fs.Options) (*fs.MountPoint, error) {
	m, err := fs.Mount(ctx, svc, bucket, dir, o)
	if err != nil {
		return nil, err
	}
	if !o.AsOf.IsZero() {
		fmt.Fprintf(e.stdout, "mounted bucket %s on %s as it was at %s, read-only\n",
			bucket, dir, o.AsOf.Format(time.RFC3339Nano))
		return m, nil
	}
	fmt.Fprintf(e.stdout, "mounted bucket %s on %s; old versions are under %s, past states under %s\n",
		bucket, dir, filepath.Join(dir, ".versions"), filepath.Join(dir, ".snapshots", "<RFC 3339 instant>"))
	return m, nil
}

// unmount unmounts m, retrying while files are open, and returns once the
// mount is gone and its changes are committed.
func unmount(e *env, m *fs.MountPoint) {
	for try := 0; ; try++ {
		err := m.Unmount()
		if err == nil {
			return
		}
		if try == 0 {
			fmt.Fprintf(e.stderr, "stratafs: unmount: %v; retrying until they are closed\n", err)
		}
		select {
		case <-m.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
