package data

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed tells the kernel that the bytes [off, off+n) of f will be read
// soon, so that it starts reading them into the page cache now. It is a
// hint: failures are ignored.
func willNeed(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		_ = unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED)
	})
}
