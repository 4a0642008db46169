package bolt

import (
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"os"
	"time"
)

// freelistStored reports whether the current meta page of the bbolt file
// f names a stored free-page list; false when f is too short or not a
// bbolt file. In bbolt's format (version 2) the meta of pages 0 and 1
// starts at byte 16 of each: magic, version, page size and flags (4 bytes
// each), the root bucket (16), then the list's page id and the txid (8
// each). The valid page with the higher txid is current; no stored list is
// a page id of all ones.
func freelistStored(f *os.File) bool {
	const magic, start, size = 0xed0cdaed, 16, 56
	meta := func(off int64) ([]byte, bool) {
		m := make([]byte, size)
		if _, err := f.ReadAt(m, off+start); err != nil || binary.LittleEndian.Uint32(m) != magic {
			return nil, false
		}
		return m, true
	}
	m0, ok0 := meta(0)
	if !ok0 {
		return false
	}
	cur := m0
	if m1, ok1 := meta(int64(binary.LittleEndian.Uint32(m0[8:]))); ok1 && binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) {
		cur = m1
	}
	return binary.LittleEndian.Uint64(cur[32:]) != math.MaxUint64
}

// warm reads the whole file at path, in order, when its free-page list is
// not stored: its last process did not close it (see engine.Close), and
// bbolt's Open is about to walk every page of its tree to rebuild the list.
// Read in order first, the walk finds the pages in the page cache: with a
// 270 MB file not in the cache the walk alone took 7.4 s of random reads.
func warm(path string) {
	f, err := os.Open(path)
	if err != nil {
		return // a new file, or one bbolt's Open will report on
	}
	defer f.Close()
	if freelistStored(f) {
		return
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return
	}
	slog.Info("meta store was not closed cleanly: reading it once to rebuild its free-page list", "path", path, "MiB", fi.Size()>>20)
	start := time.Now()
	n, err := io.Copy(io.Discard, f)
	slog.Info("meta store read", "path", path, "MiB", n>>20, "took", time.Since(start).Round(time.Millisecond), "err", err)
}
