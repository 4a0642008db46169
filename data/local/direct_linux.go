package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// setDirect turns direct I/O (O_DIRECT) on or off for f's later writes.
// Turning it on fails with EINVAL where the file system has no direct I/O.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	cerr := rc.Control(func(fd uintptr) {
		var fl int
		if fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil {
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, err = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	if cerr != nil {
		return cerr
	}
	return err
}
