//go:build !linux

package local

import (
	"os"
	"syscall"
)

// setDirect refuses direct I/O as a file system without it does: chunks
// are written through the page cache on systems other than Linux.
func setDirect(*os.File, bool) error { return syscall.EINVAL }
