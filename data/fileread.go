package data

import (
	"context"
	"fmt"
	"io"
	"os"
)

// fileReader streams a range of an object whose chunks are local files (a
// FileStore), a chunk range at a time: it opens the chunk's file at the
// range's first byte in it and reads on up to the range's end there.
//
// Its WriteTo hands each piece to the writer as an io.LimitedReader over
// the open file, through io.Copy: a writer whose ReadFrom knows files
// (net/http's response over TCP) sends it with sendfile. Holes are written
// as zeros. A chunk shorter than its manifest says is ErrCorrupt, a
// missing one ErrNoSuchChunk, even after part of the range was written:
// the caller must not take a short stream for the whole.
type fileReader struct {
	ctx      context.Context
	ra       *ReaderAt
	fs       FileStore
	off, end int64 // what is left of the range
	// The current piece: the bytes [off, pend) lie in one chunk range and
	// are read from f at its offset, or are zeros when f is nil (a hole).
	f    *os.File
	pend int64
	// ahead is 1 + the index of the chunk range last prefetched, 0 before
	// the first piece.
	ahead int
	err   error // sticky
}

// piece makes the current piece hold the byte at off, opening the next
// chunk's file if needed; io.EOF at the end of the range.
func (r *fileReader) piece() error {
	if r.err != nil {
		return r.err
	}
	if r.off < r.pend {
		return nil
	}
	r.closeFile()
	if r.off >= r.end {
		return io.EOF
	}
	if err := r.ctx.Err(); err != nil {
		return r.fail(err)
	}
	i := r.ra.chunk(r.off)
	start := r.ra.ends[i] - r.ra.m.Chunks[i].Length // of the chunk range, in the object
	r.pend = min(r.end, r.ra.ends[i])
	first := r.ahead == 0 // no piece asked for chunk range i ahead
	r.prefetch(i + 1)
	c := r.ra.m.Chunks[i]
	if c.Hole() {
		return nil
	}
	f, err := r.fs.OpenChunk(ChunkID(c.Id))
	if err != nil {
		return r.fail(err)
	}
	r.f = f
	at := c.Offset + r.off - start
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return r.fail(fmt.Errorf("read chunk %s: %w", ChunkID(c.Id), err))
	}
	if first {
		willNeed(f, at, r.pend-r.off)
	}
	return nil
}

// prefetch asks the kernel to read the part of chunk range i the stream
// will send, if any, while the current piece is sent: the file of a chunk
// that is not in the page cache is then read from the disk ahead of its
// turn, as the buffered reader's fetcher reads ahead of its consumer. A
// chunk that cannot be opened is left for piece to report.
func (r *fileReader) prefetch(i int) {
	r.ahead = i + 1
	if i >= len(r.ra.m.Chunks) || r.pend >= r.end || r.ra.m.Chunks[i].Hole() {
		return
	}
	c := r.ra.m.Chunks[i]
	f, err := r.fs.OpenChunk(ChunkID(c.Id))
	if err != nil {
		return
	}
	willNeed(f, c.Offset, min(c.Length, r.end-r.pend))
	f.Close()
}

// short is the error of a piece whose file ended before the manifest
// said it would.
func (r *fileReader) short() error {
	i := r.ra.chunk(r.off)
	return r.fail(fmt.Errorf("chunk %s ends %d bytes short of the manifest: %w",
		ChunkID(r.ra.m.Chunks[i].Id), r.pend-r.off, ErrCorrupt))
}

func (r *fileReader) Read(p []byte) (int, error) {
	if err := r.piece(); err != nil {
		return 0, err
	}
	p = p[:min(int64(len(p)), r.pend-r.off)]
	if r.f == nil {
		clear(p)
		r.off += int64(len(p))
		return len(p), nil
	}
	n, err := r.f.Read(p)
	r.off += int64(n)
	switch {
	case err == io.EOF:
		return n, r.short()
	case err != nil:
		return n, r.fail(fmt.Errorf("read chunk: %w", err))
	}
	return n, nil
}

func (r *fileReader) Ready() error { return ready(r.piece()) }

// WriteTo writes the rest of the range to w, handing it the chunk files
// themselves (see fileReader).
func (r *fileReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.piece(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		want := r.pend - r.off
		src := io.LimitReader(zeros{}, want)
		if r.f != nil {
			src = &io.LimitedReader{R: r.f, N: want}
		}
		n, err := io.Copy(w, src)
		r.off += n
		total += n
		switch {
		case err != nil:
			return total, r.fail(err)
		case n < want:
			return total, r.short()
		}
	}
}

// fail makes err sticky and closes the current file.
func (r *fileReader) fail(err error) error {
	r.closeFile()
	r.err = err
	return err
}

func (r *fileReader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// Close closes the current file; reads after it fail.
func (r *fileReader) Close() error {
	r.fail(errClosed)
	return nil
}
