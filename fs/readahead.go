package fs

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// readaheadKB is the readahead the mount asks the kernel for, and so the
// size of the reads it sends when a file is read in order: 512 KiB rather
// than the kernel's 128 KiB default cuts the requests, and their cost, by
// four. Larger requests would no longer be spliced: the reply must fit a
// pipe, which the kernel caps at 1 MiB by default (fs.pipe-max-size).
const readaheadKB = 512

// setReadahead sets the readahead of the file system mounted on dir. Only
// root may (it is a setting of the kernel's backing device, in sysfs);
// otherwise the kernel's default stays and reads are only smaller.
func setReadahead(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(strconv.Itoa(readaheadKB)), 0)
}
