// Package local stores chunks as files under a directory: the default chunk
// store of a single machine.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/stratafs/stratafs/data"
)

// staleAfter is how old a temporary file must be before Open removes it:
// younger ones may belong to a chunk still being written in another
// process (each write makes its file younger again).
const staleAfter = time.Hour

// Store keeps each chunk in its own file, chunks/<2 hex>/<32 hex> under its
// directory. A chunk is written in full under tmp/, flushed and only then
// renamed into place, so a chunk's final name never holds partial bytes,
// whatever crashes when. A Store is safe for concurrent use.
type Store struct {
	chunks, tmp string
	// write writes b to f; tests replace it to simulate a full disk.
	write func(f *os.File, b []byte) (int, error)
	// direct turns direct I/O on or off for f (setDirect); tests replace
	// it to simulate a file system without direct I/O.
	direct func(f *os.File, on bool) error
	// buffered is set when chunks are written through the page cache:
	// direct I/O was not asked for, or the file system refused it.
	buffered atomic.Bool
}

// Options tune a Store.
type Options struct {
	// DirectIO writes chunk files with direct I/O (O_DIRECT, on Linux)
	// where the file system allows it. Copying every written byte into
	// fresh page-cache pages was the largest CPU cost of the S3 PUT path
	// after hashing (write(2) took 1.65 s per GiB with 16 clients on a
	// 2-core VM); direct writes skip that copy (0.30 s per GiB). Reads
	// still go through the page cache, so a chunk read soon after its
	// write comes from the disk: a 64 MiB GET right after its PUT fell
	// by a third, a 1 GiB FUSE read after its write to 0.61–0.97 of the
	// served loopback's (1.54 before). Off by default, as in any file
	// system: what was just written is read again from memory.
	DirectIO bool
}

var _ data.StreamStore = (*Store)(nil)

// Open opens the store in dir, creating it if needed, and removes the
// temporary files of chunks whose writing stopped more than an hour ago.
func Open(dir string, o Options) (*Store, error) {
	s := &Store{
		chunks: filepath.Join(dir, "chunks"),
		tmp:    filepath.Join(dir, "tmp"),
		write:  (*os.File).Write,
		direct: setDirect,
	}
	s.buffered.Store(!o.DirectIO)
	if err := s.init(dir); err != nil {
		return nil, fmt.Errorf("open chunk store %s: %w", dir, err)
	}
	return s, nil
}

// init creates the directories up front, so Commit never has to (and never
// has to make a new directory durable), and cleans tmp/.
func (s *Store) init(dir string) error {
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(s.chunks, fmt.Sprintf("%02x", i)), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.tmp, 0o755); err != nil {
		return err
	}
	// A renamed chunk is only as durable as the directories above it.
	for _, d := range []string{s.chunks, dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return s.clean(time.Now().Add(-staleAfter))
}

// clean removes the temporary files modified before cutoff.
func (s *Store) clean(cutoff time.Time) error {
	ents, err := os.ReadDir(s.tmp)
	if err != nil {
		return err
	}
	for _, e := range ents {
		info, err := e.Info()
		if err == nil && info.ModTime().Before(cutoff) {
			err = os.Remove(filepath.Join(s.tmp, e.Name()))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// gone wraps err, from a file operation under the store, in
// data.ErrUnavailable when the store's directories are not there (the
// disk unmounted or detached) or the disk fails to read or write (EIO):
// such a failure is the store's, not the chunk's, and may pass once the
// disk is back. The front ends answer it as an outage (S3 503, EIO), not
// as a missing chunk or an internal error, and the mount's journal keeps
// retrying the changes it holds.
func (s *Store) gone(err error) error {
	if err == nil || errors.Is(err, data.ErrUnavailable) {
		return err
	}
	if errors.Is(err, syscall.EIO) || errors.Is(err, fs.ErrNotExist) && !s.present() {
		return fmt.Errorf("%w: %w", data.ErrUnavailable, err)
	}
	return err
}

// missing reports whether err, passed through gone, says that a file is
// absent from a store that is there.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) && !errors.Is(err, data.ErrUnavailable)
}

// present reports whether the store's directories are there.
func (s *Store) present() bool {
	for _, d := range []string{s.chunks, s.tmp} {
		if _, err := os.Stat(d); err != nil {
			return false
		}
	}
	return true
}

// path returns where chunk id lives.
func (s *Store) path(id data.ChunkID) string {
	h := id.String()
	return filepath.Join(s.chunks, h[:2], h)
}

// Put stores chunk id durably, as a chunk CreateChunk starts and Commit
// ends.
func (s *Store) Put(ctx context.Context, id data.ChunkID, b []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put chunk %s: %w", id, err)
	}
	w, err := s.CreateChunk(id)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Abort()
		return err
	}
	return w.Commit(ctx)
}

// CreateChunk starts chunk id in a temporary file, which Commit renames
// into place: data.Write streams a body to its chunk files this way,
// holding no chunk in memory. With Options.DirectIO the file takes
// direct I/O, unless the file system refused it before.
func (s *Store) CreateChunk(id data.ChunkID) (data.ChunkWriter, error) {
	f, err := os.CreateTemp(s.tmp, "")
	if err != nil {
		return nil, fmt.Errorf("put chunk %s: %w", id, s.gone(err))
	}
	w := &chunkWriter{s: s, id: id, f: f}
	if !s.buffered.Load() {
		switch err := s.direct(f, true); {
		case err == nil:
			w.direct = true
		case errors.Is(err, syscall.EINVAL):
			s.buffered.Store(true)
		default:
			w.Abort()
			return nil, fmt.Errorf("put chunk %s: direct I/O: %w", id, err)
		}
	}
	return w, nil
}

// align is what direct I/O needs aligned to it: file offsets, lengths and
// memory addresses. 4096 covers the logical blocks of current disks.
const align = 4096

// A chunkWriter writes a chunk to its temporary file.
type chunkWriter struct {
	s      *Store
	id     data.ChunkID
	f      *os.File // nil once committed or aborted
	off    int64    // bytes written
	direct bool     // f has direct I/O on
}

// Write writes b directly to the disk while everything stays aligned. The
// first write that is not (the tail of a body, a caller's unaligned
// slice) turns direct I/O off for the rest of the file, rather than copy
// b to an aligned buffer.
func (w *chunkWriter) Write(b []byte) (int, error) {
	if w.direct && !aligned(w.off, b) {
		if err := w.s.direct(w.f, false); err != nil {
			return 0, fmt.Errorf("put chunk %s: direct I/O off: %w", w.id, err)
		}
		w.direct = false
	}
	n, err := w.s.write(w.f, b)
	w.off += int64(n)
	if err != nil {
		err = fmt.Errorf("put chunk %s: %w", w.id, w.s.gone(err))
	}
	return n, err
}

// aligned reports whether b may be written at off with direct I/O.
func aligned(off int64, b []byte) bool {
	return off%align == 0 && len(b)%align == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0
}

// Commit makes the chunk durable: its file flushed (direct writes need
// it too, for the file's size and extents and the disk's write cache),
// renamed into place, and the rename flushed. On failure (a full disk,
// say) the temporary file is removed.
func (w *chunkWriter) Commit(ctx context.Context) error {
	f := w.f
	w.f = nil
	err := ctx.Err()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	p := w.s.path(w.id)
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	} else if err = syncDir(filepath.Dir(p)); err != nil {
		os.Remove(p) // in place, but maybe not after a crash
	}
	if err != nil {
		return fmt.Errorf("put chunk %s: %w", w.id, w.s.gone(err))
	}
	return nil
}

// Abort removes the temporary file.
func (w *chunkWriter) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// syncDir flushes a directory, making the entries created or renamed in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadAt reads len(p) bytes of chunk id at off, as io.ReaderAt does.
func (s *Store) ReadAt(ctx context.Context, id data.ChunkID, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("read chunk %s: %w", id, err)
	}
	f, err := s.OpenChunk(id)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read chunk %s: %w", id, s.gone(err))
	}
	return n, err
}

var _ data.FileStore = (*Store)(nil)

// OpenChunk opens the file of chunk id for reading.
func (s *Store) OpenChunk(id data.ChunkID) (*os.File, error) {
	f, err := os.Open(s.path(id))
	switch err = s.gone(err); {
	case missing(err):
		return nil, fmt.Errorf("chunk %s: %w", id, data.ErrNoSuchChunk)
	case err != nil:
		return nil, fmt.Errorf("read chunk %s: %w", id, err)
	}
	return f, nil
}

// Delete removes chunk id. It does not flush the directory: a chunk that
// reappears after a crash is garbage the collector removes again.
func (s *Store) Delete(ctx context.Context, id data.ChunkID) error {
	if err := s.gone(os.Remove(s.path(id))); err != nil && !missing(err) {
		return fmt.Errorf("delete chunk %s: %w", id, err)
	}
	return nil
}

// Walk calls fn for every chunk, skipping files that are not chunks in
// their place (those Delete could not remove).
func (s *Store) Walk(ctx context.Context, fn func(id data.ChunkID, size int64, modified time.Time) error) error {
	dirs, err := os.ReadDir(s.chunks)
	if err != nil {
		return fmt.Errorf("walk chunks: %w", s.gone(err))
	}
	for _, d := range dirs {
		if d.IsDir() {
			if err := s.walkDir(ctx, d.Name(), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkDir walks one chunks/ subdirectory, reading it a batch of names at a
// time: a directory may hold millions of chunks.
func (s *Store) walkDir(ctx context.Context, name string, fn func(data.ChunkID, int64, time.Time) error) error {
	dir := filepath.Join(s.chunks, name)
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("walk chunks: %w", err)
	}
	defer f.Close()
	for {
		ents, rerr := f.ReadDir(1024)
		for _, e := range ents {
			id, err := data.ParseChunkID(e.Name())
			if err != nil || s.path(id) != filepath.Join(dir, e.Name()) {
				continue
			}
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) { // deleted meanwhile
				continue
			}
			if err != nil {
				return fmt.Errorf("walk chunks: %w", err)
			}
			if err := fn(id, info.Size(), info.ModTime()); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("walk chunks: %w", rerr)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Close does nothing: every chunk is durable when its Put or Commit
// returns.
func (s *Store) Close() error { return nil }
