package fs

import (
	"context"
	"errors"
	"syscall"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// errno maps an error of the core to the errno a FUSE request answers
// with. It is the one place errors cross into POSIX. Errors that have no
// POSIX meaning are logged, with op naming what failed, and become EIO.
func (f *fsys) errno(op string, err error) syscall.Errno {
	var e syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, meta.ErrUnavailable), errors.Is(err, data.ErrUnavailable):
		// A store did not answer: EIO, logged below, even when the
		// error also carries the errno of a vanished disk (ENOENT) or
		// the deadline the store gave up at.
	case errors.As(err, &e): // a commit check's verdict, or the staging disk's
		return e
	case meta.IsNotFound(err), errors.Is(err, meta.ErrDeleteMarker), errors.Is(err, meta.ErrNoSuchBucket):
		return syscall.ENOENT
	case errors.Is(err, meta.ErrInvalidKey), errors.Is(err, meta.ErrInvalidArgument):
		return syscall.EINVAL
	case errors.Is(err, object.ErrTooManyKeys):
		return syscall.EXDEV
	case errors.Is(err, meta.ErrConflict):
		return syscall.EAGAIN
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	f.log.Error("stratafs: "+op, "bucket", f.bucket, "err", err)
	return syscall.EIO
}

// failedCommit is the errno of a change that could not be made durable:
// ENOSPC or EDQUOT when a disk is full, as close(2) and fsync(2) report it
// on NFS, else EIO. Either way the file's last committed version stands.
func failedCommit(err error) syscall.Errno {
	var e syscall.Errno
	if meta.IsNoSpace(err) && errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// uninterrupted returns ctx without its cancellation, for the short
// metadata reads: lookup, getattr, readdir, getxattr. The kernel
// interrupts a request (FUSE_INTERRUPT) whenever its caller gets a
// signal, the Go runtime's preemption signals among them, and the EINTR
// an interrupted read would answer reaches callers that do not retry it:
// a rename(2) whose lookup of the source was interrupted fails. Such a
// read is short and bounded still by the store's own timeout, which
// answers meta.ErrUnavailable, so EIO. Changes ignore interrupts too,
// calling context.WithoutCancel themselves: a change must not stop half
// made.
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
