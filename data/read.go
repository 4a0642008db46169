package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sort"
)

// ErrRange means a byte range does not lie within the object.
var ErrRange = errors.New("range not satisfiable")

// errClosed is what a reader returns once closed.
var errClosed = errors.New("data: read after Close")

// A ReaderAt reads an object's bytes at any offset, for random-access
// readers such as the FUSE mount; the streaming reader is built on it, so
// finding the chunk that holds an offset is done in one place. It is safe
// for concurrent use.
type ReaderAt struct {
	s    Store
	m    *Manifest
	ends []int64 // ends[i] is where m.Chunks[i] ends within the object
}

// NewReaderAt returns a ReaderAt over m's bytes in s. m must be valid (as
// DecodeManifest returns it) and must not change while in use.
func NewReaderAt(s Store, m *Manifest) *ReaderAt {
	r := &ReaderAt{s: s, m: m, ends: make([]int64, len(m.Chunks))}
	var pos int64
	for i, c := range m.Chunks {
		pos += c.Length
		r.ends[i] = pos
	}
	return r
}

// Size returns the object's length.
func (r *ReaderAt) Size() int64 { return r.m.Size }

// chunk returns the index of the chunk range holding byte off, or
// len(m.Chunks) when off is at or past the end.
func (r *ReaderAt) chunk(off int64) int {
	return sort.Search(len(r.ends), func(i int) bool { return r.ends[i] > off })
}

// ReadAt reads len(p) bytes at off, with io.ReaderAt's contract: fewer
// only with an error, io.EOF when the object ends first. A chunk shorter
// than the manifest says is ErrCorrupt.
func (r *ReaderAt) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at %d: %w", off, ErrRange)
	}
	if len(r.m.Chunks) == 0 {
		n := 0
		if off < int64(len(r.m.Inline)) {
			n = copy(p, r.m.Inline[off:])
		}
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	n := 0
	for i := r.chunk(off); n < len(p) && i < len(r.m.Chunks); i++ {
		c := r.m.Chunks[i]
		q := p[n:]
		if rest := r.ends[i] - off; int64(len(q)) > rest {
			q = q[:rest]
		}
		if c.Hole() {
			clear(q)
			n += len(q)
			off += int64(len(q))
			continue
		}
		at := c.Offset + off - (r.ends[i] - c.Length) // off within the stored chunk
		k, err := r.s.ReadAt(ctx, ChunkID(c.Id), q, at)
		n += k
		off += int64(k)
		if k < len(q) {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("chunk %s: %d bytes at %d, got %d: %w", ChunkID(c.Id), len(q), at, k, ErrCorrupt)
			}
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Span locates the bytes [off, off+n) of the object when they lie in one
// stored chunk: its id and where they start within it. ok is false when
// they cross a chunk boundary, lie past the end, in a hole, or are inline.
func (r *ReaderAt) Span(off, n int64) (id ChunkID, at int64, ok bool) {
	if off < 0 || n <= 0 || len(r.m.Chunks) == 0 {
		return id, 0, false
	}
	i := r.chunk(off)
	if i == len(r.m.Chunks) || off+n > r.ends[i] {
		return id, 0, false
	}
	c := r.m.Chunks[i]
	if c.Hole() {
		return id, 0, false
	}
	return ChunkID(c.Id), c.Offset + off - (r.ends[i] - c.Length), true
}

// OpenChunk opens the local file of chunk id, when the store keeps chunks
// in local files (a FileStore); ok is false when it does not.
func (r *ReaderAt) OpenChunk(id ChunkID) (f *os.File, ok bool, err error) {
	fs, ok := r.s.(FileStore)
	if !ok {
		return nil, false, nil
	}
	f, err = fs.OpenChunk(id)
	return f, true, err
}

// sectionAt binds a ReaderAt to a context as an io.ReaderAt, for
// io.NewSectionReader.
type sectionAt struct {
	ctx context.Context
	r   *ReaderAt
}

func (s sectionAt) ReadAt(p []byte, off int64) (int, error) { return s.r.ReadAt(s.ctx, p, off) }

// section returns a sequential reader of the bytes [off, end) of r.
func (r *ReaderAt) section(ctx context.Context, off, end int64) io.Reader {
	return io.NewSectionReader(sectionAt{ctx, r}, off, max(end-off, 0))
}

// A Stream is a range of an object being read (NewReader). Besides
// reading it, a caller may hand it a writer with WriteTo, which moves the
// bytes with the fewest copies the store allows: chunks that are local
// files go to the writer's ReadFrom as files, which net/http sends to the
// client with sendfile, the bytes never entering this process.
type Stream interface {
	io.ReadCloser
	io.WriterTo
	// Ready waits until the first byte can be read: the first chunk's
	// file opened, or its first piece fetched. It reports a store that
	// cannot answer while the caller has promised nothing yet (an HTTP
	// status), rather than in the middle of a response. An empty range
	// is ready.
	Ready() error
}

// NewReader streams the bytes [off, off+n) of m (n < 0: to the end). From
// a FileStore it reads each chunk's file in turn, having asked the kernel
// to read the next one into the page cache meanwhile; from any other store
// it fetches the next piece (one chunk range at most) while the caller
// consumes the current one. Either way a slow client and a slow store
// overlap, without buffering more than two chunks. A range outside m fails on the first Read with an error wrapping
// ErrRange. The caller must Close the reader; ctx bounds every chunk read.
func NewReader(ctx context.Context, s Store, m *Manifest, off, n int64) Stream {
	if n < 0 {
		n = m.Size - off
	}
	if off < 0 || n < 0 || off > m.Size-n {
		return errReader{fmt.Errorf("bytes %d+%d of %d: %w", off, n, m.Size, ErrRange)}
	}
	if len(m.Chunks) == 0 {
		return inline{bytes.NewReader(m.Inline[off : off+n])}
	}
	if fs, ok := s.(FileStore); ok {
		return &fileReader{ctx: ctx, ra: NewReaderAt(s, m), fs: fs, off: off, end: off + n}
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &reader{ctx: ctx, cancel: cancel, pieces: make(chan piece), left: n}
	go r.fetch(NewReaderAt(s, m), off, off+n)
	return r
}

// inline streams a manifest's inline bytes.
type inline struct{ *bytes.Reader }

func (inline) Close() error { return nil }
func (inline) Ready() error { return nil }

// errReader fails every Read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error)         { return 0, e.err }
func (e errReader) WriteTo(io.Writer) (int64, error) { return 0, e.err }
func (e errReader) Close() error                     { return nil }
func (e errReader) Ready() error                     { return e.err }

// A piece is a buffer of fetched bytes, or the error that ended fetching.
type piece struct {
	buf *[]byte // from getBuf, to give back
	b   []byte  // the bytes not yet consumed
	err error
}

// reader streams a range: fetch reads pieces in a goroutine and hands them
// over an unbuffered channel, so it runs at most one piece ahead.
type reader struct {
	ctx    context.Context
	cancel context.CancelFunc
	pieces chan piece
	cur    piece // the piece being consumed
	left   int64 // bytes of the range not yet returned
	err    error // sticky
}

// fetch reads [off, end) piece by piece, each within one chunk range so
// that it is one store read, and at most DefaultChunkSize so that an
// object written with huge chunks still streams in bounded memory.
func (r *reader) fetch(ra *ReaderAt, off, end int64) {
	defer close(r.pieces)
	for off < end && r.ctx.Err() == nil {
		k := min(end, ra.ends[ra.chunk(off)]) - off
		k = min(k, DefaultChunkSize)
		// Round sizes up to a power of two: few pools, full reuse.
		buf := getBuf(1 << bits.Len64(uint64(k-1)))
		b := (*buf)[:k]
		_, err := ra.ReadAt(r.ctx, b, off)
		select {
		case r.pieces <- piece{buf: buf, b: b, err: err}:
		case <-r.ctx.Done():
			putBuf(buf)
			return
		}
		if err != nil {
			return
		}
		off += k
	}
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.next(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur.b)
	r.consume(n)
	return n, nil
}

// WriteTo writes the rest of the range to w straight from the fetched
// pieces, without copying them through a buffer of its own.
func (r *reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.next(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		n, err := w.Write(r.cur.b)
		r.consume(n)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

// next makes sure the current piece has bytes left, waiting for the next
// one if needed; io.EOF at the end of the range.
func (r *reader) next() error {
	for len(r.cur.b) == 0 {
		if r.err != nil {
			return r.err
		}
		if r.left == 0 {
			return io.EOF
		}
		r.release()
		pc, ok := <-r.pieces
		switch {
		case !ok: // fetch saw ctx end before it could hand over an error
			r.err = context.Cause(r.ctx)
		case pc.err != nil:
			putBuf(pc.buf)
			r.err = pc.err
		default:
			r.cur = pc
		}
	}
	return nil
}

func (r *reader) Ready() error { return ready(r.next()) }

// ready is the error of Ready given the error of making the first byte
// current: the end of the range is no error.
func ready(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// consume drops the first n bytes of the current piece.
func (r *reader) consume(n int) {
	r.cur.b = r.cur.b[n:]
	r.left -= int64(n)
}

// release gives the current piece's buffer back.
func (r *reader) release() {
	if r.cur.buf != nil {
		putBuf(r.cur.buf)
		r.cur = piece{}
	}
}

// Close stops fetching and waits for the fetcher to exit, so no store
// read outlives the reader.
func (r *reader) Close() error {
	r.cancel()
	for pc := range r.pieces {
		putBuf(pc.buf)
	}
	r.release()
	r.err = errClosed
	return nil
}
