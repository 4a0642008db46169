//go:build !linux

package data

import "os"

// willNeed does nothing where posix_fadvise is not at hand: the kernel's
// own read-ahead within a file remains.
func willNeed(*os.File, int64, int64) {}
