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
)

// runMount mounts a bucket in the foreground until SIGINT or SIGTERM,
// then unmounts it, waiting for open files to be closed; it returns once
// every change made in the mount is committed.
func runMount(ctx context.Context, e *env, args []string) error {
	fl := flag.NewFlagSet("mount", flag.ContinueOnError)
	readOnly := fl.Bool("read-only", false, "mount read-only")
	allowOther := fl.Bool("allow-other", false, "let other users use the mount (permissions are checked against file modes)")
	uid := fl.Uint("uid", uint(os.Getuid()), "owner of keys that carry no POSIX attributes")
	gid := fl.Uint("gid", uint(os.Getgid()), "group of keys that carry no POSIX attributes")
	umask := fl.String("umask", "022", "octal umask for keys that carry no POSIX attributes")
	attrTimeout := fl.Duration("attr-timeout", time.Second, "how long the kernel caches attributes")
	entryTimeout := fl.Duration("entry-timeout", time.Second, "how long the kernel caches names")
	pos, err := parse(fl, args, 2, 2)
	if err != nil {
		return err
	}
	mask, err := strconv.ParseUint(*umask, 8, 32)
	if err != nil || mask > 0o777 {
		return fmt.Errorf("--umask %q is not an octal mode: %w", *umask, errUsage)
	}
	svc, closeAll, err := openService(e.dataDir)
	if err != nil {
		return err
	}
	defer closeAll()
	m, err := fs.Mount(ctx, svc, pos[0], pos[1], fs.Options{
		StagingDir:   filepath.Join(e.dataDir, "staging"),
		ReadOnly:     *readOnly,
		AllowOther:   *allowOther,
		UID:          uint32(*uid),
		GID:          uint32(*gid),
		Umask:        uint32(mask),
		AttrTimeout:  *attrTimeout,
		EntryTimeout: *entryTimeout,
		Logger:       slog.New(slog.NewTextHandler(e.stderr, nil)),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "mounted bucket %s on %s; old versions are under %s; Ctrl-C unmounts\n",
		pos[0], pos[1], filepath.Join(pos[1], ".versions"))
	select {
	case <-m.Done(): // unmounted with umount(8)
		return nil
	case <-ctx.Done():
	}
	for try := 0; ; try++ {
		err := m.Unmount()
		if err == nil {
			return nil
		}
		if try == 0 {
			fmt.Fprintf(e.stderr, "stratafs mount: %v; retrying until they are closed\n", err)
		}
		select {
		case <-m.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
