package fs

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data"
)

// maxChunkFiles is how many chunk files a read handle keeps open: the
// chunk being read and the one before it, which replies still in flight
// (the kernel reads ahead, several requests at once) may splice from.
const maxChunkFiles = 2

// chunkFiles lets a read handle answer a read that lies within one chunk
// of a local chunk store with the chunk's file rather than its bytes:
// go-fuse then splices the bytes from the file to the kernel, as a
// passthrough file system does, instead of copying them twice through a
// buffer. Each chunk file is opened once per handle, not once per read.
// The zero value is ready for use.
type chunkFiles struct {
	mu     sync.Mutex
	open   []*chunkFile // the most recently opened last
	closed bool
	// none is set once the store turned out not to keep chunks in local
	// files: every read is then copied.
	none bool
}

// A chunkFile is an open chunk file. It is closed once it has left the
// handle's list and no reply splices from it any more.
type chunkFile struct {
	id   data.ChunkID
	f    *os.File
	fd   uintptr
	size int64
	refs int // the list's own and one per reply in flight; guarded by chunkFiles.mu
}

// read returns the reply to a read of n bytes at off of r when they lie
// within one local chunk file, or nil when the read must be copied (it
// crosses chunks, the store is not local, or the chunk file is missing
// or short: the copying read then reports the error).
func (c *chunkFiles) read(r *data.ReaderAt, off int64, n int) fuse.ReadResult {
	n = int(min(int64(n), r.Size()-off))
	id, at, ok := r.Span(off, int64(n))
	if !ok {
		return nil
	}
	cf := c.get(r, id)
	if cf == nil {
		return nil
	}
	if at+int64(n) > cf.size {
		c.put(cf)
		return nil
	}
	return &splicedRead{c: c, cf: cf, off: at, n: n}
}

// get returns chunk id's file with a reference held for the caller, or
// nil.
func (c *chunkFiles) get(r *data.ReaderAt, id data.ChunkID) *chunkFile {
	c.mu.Lock()
	if c.none || c.closed {
		c.mu.Unlock()
		return nil
	}
	for _, cf := range c.open {
		if cf.id == id {
			cf.refs++
			c.mu.Unlock()
			return cf
		}
	}
	c.mu.Unlock()

	f, local, err := r.OpenChunk(id)
	if !local {
		c.mu.Lock()
		c.none = true
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil
	}
	cf := &chunkFile{id: id, f: f, fd: f.Fd(), size: fi.Size(), refs: 2}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		f.Close()
		return nil
	}
	c.open = append(c.open, cf)
	if len(c.open) > maxChunkFiles {
		c.dropLocked(c.open[0])
		c.open = c.open[1:]
	}
	return cf
}

// put drops a reference to cf.
func (c *chunkFiles) put(cf *chunkFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(cf)
}

func (c *chunkFiles) dropLocked(cf *chunkFile) {
	if cf.refs--; cf.refs == 0 {
		cf.f.Close()
	}
}

// close lets go of every file; those replies still splice from close
// when the replies are done.
func (c *chunkFiles) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, cf := range c.open {
		c.dropLocked(cf)
	}
	c.open = nil
}

// A splicedRead is the reply to a read: n bytes at off of a chunk file.
// go-fuse splices them (through Seekable) or, when it cannot, reads them
// with Bytes; Done runs once the reply is sent.
type splicedRead struct {
	c   *chunkFiles
	cf  *chunkFile
	off int64
	n   int
}

func (s *splicedRead) Seekable() (fd uintptr, off int64, n int) { return s.cf.fd, s.off, s.n }

func (s *splicedRead) Size() int { return s.n }

func (s *splicedRead) Bytes(buf []byte) ([]byte, fuse.Status) {
	n, err := s.cf.f.ReadAt(buf[:min(len(buf), s.n)], s.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

func (s *splicedRead) Done() { s.c.put(s.cf) }
