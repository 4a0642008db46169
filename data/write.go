package data

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for WriteOptions.
const (
	DefaultChunkSize = 8 << 20
	DefaultInlineMax = 4096
)

// window is how many chunk buffers one Write holds at most: one being
// filled from the body while the others are being Put.
const window = 3

// cleanupTimeout bounds the best-effort deletion of a failed write's
// chunks, which runs even when the caller's context has ended.
const cleanupTimeout = time.Minute

// WriteOptions tune Write.
type WriteOptions struct {
	// ChunkSize is the size bodies are cut into (DefaultChunkSize when
	// 0). A Write holds up to three buffers of this size.
	ChunkSize int
	// InlineMax is the largest body stored inside the manifest, with no
	// chunk and no fsync (DefaultInlineMax when 0; negative: never). It is
	// capped below ChunkSize. Write multipart parts with a negative
	// InlineMax: Concat cannot join inline bytes with chunks.
	InlineMax int
}

func (o WriteOptions) withDefaults() WriteOptions {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.InlineMax == 0 {
		o.InlineMax = DefaultInlineMax
	}
	o.InlineMax = min(o.InlineMax, o.ChunkSize-1)
	return o
}

// WriteResult describes a written body.
type WriteResult struct {
	Manifest *Manifest
	Size     int64
	MD5      [16]byte
}

// Write stores the body r as chunks and returns its manifest, size and
// MD5. It streams: reading the next chunk overlaps hashing the previous
// one (on another core) and the Puts of those before, and it never holds
// more than three chunk buffers.
// When Write returns nil every chunk is durable, so a version row may name
// them. On error it returns after every Put it started has finished,
// having deleted (best effort) the chunks it wrote.
func Write(ctx context.Context, s Store, r io.Reader, o WriteOptions) (*WriteResult, error) {
	o = o.withDefaults()
	h := md5.New()
	m := new(Manifest)
	// Read a small body's bytes on their own first, so that it never takes
	// a chunk buffer (and a slot of the caller's memory budget).
	var head []byte
	if o.InlineMax >= 0 {
		head = make([]byte, o.InlineMax+1)
		n, err := fill(r, head)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		// A body of exactly InlineMax+1 bytes may end with this read too; it
		// goes to a chunk, and the loop below reads the EOF again.
		if head = head[:n]; err == io.EOF && n <= o.InlineMax {
			h.Write(head)
			m.Size, m.Inline = int64(n), head
			w := &WriteResult{Manifest: m, Size: m.Size}
			h.Sum(w.MD5[:0])
			return w, nil
		}
	}
	p := newPutter(ctx, s)
	defer p.cancel(nil)
	hs := newHasher(h, p)
	defer hs.close()
	for {
		buf, err := p.acquire(o.ChunkSize)
		if err != nil {
			return nil, p.fail(err)
		}
		k := copy(*buf, head)
		head = nil
		n, err := fill(r, (*buf)[k:])
		n += k
		last := err == io.EOF
		if err != nil && !last {
			p.release(buf)
			return nil, p.fail(fmt.Errorf("reading body: %w", err))
		}
		m.Size += int64(n)
		switch {
		case n > 0 && zero((*buf)[:n]):
			// Stored nowhere: a hole (sparse files, zero-filled images).
			hs.hash(buf, n, 1)
			if k := len(m.Chunks) - 1; k >= 0 && m.Chunks[k].Hole() {
				m.Chunks[k].Length += int64(n)
			} else {
				m.Chunks = append(m.Chunks, &Chunk{Length: int64(n)})
			}
		case n > 0:
			id := NewChunkID()
			m.Chunks = append(m.Chunks, &Chunk{Id: id[:], Length: int64(n)})
			u := hs.hash(buf, n, 2)
			p.put(id, buf, n, u.done)
		default:
			p.release(buf)
		}
		if last {
			break
		}
	}
	hs.close()
	if err := p.wait(); err != nil {
		return nil, err
	}
	w := &WriteResult{Manifest: m, Size: m.Size}
	h.Sum(w.MD5[:0])
	return w, nil
}

// A hasher feeds chunk buffers, in order, to a hash in a goroutine of its
// own, so that hashing one chunk overlaps reading the next.
type hasher struct {
	p    *putter
	in   chan *use
	done chan struct{}
}

// A use is a chunk buffer shared by the hasher and a Put: the last of
// them to be done with it gives it back.
type use struct {
	buf  *[]byte
	n    int
	refs atomic.Int32
	p    *putter
}

func (u *use) done() {
	if u.refs.Add(-1) == 0 {
		u.p.release(u.buf)
	}
}

func newHasher(h hash.Hash, p *putter) *hasher {
	in := make(chan *use, window)
	hs := &hasher{p: p, in: in, done: make(chan struct{})}
	go func() {
		defer close(hs.done)
		for u := range in {
			h.Write((*u.buf)[:u.n])
			u.done()
		}
	}()
	return hs
}

// hash queues the first n bytes of buf, which refs users (the hasher
// among them) will be done with.
func (hs *hasher) hash(buf *[]byte, n int, refs int32) *use {
	u := &use{buf: buf, n: n, p: hs.p}
	u.refs.Store(refs)
	hs.in <- u
	return u
}

// close waits until everything queued is hashed; it may be called again.
func (hs *hasher) close() {
	if hs.in != nil {
		close(hs.in)
		hs.in = nil
	}
	<-hs.done
}

// zeroPage is compared against to find chunks of zeros.
var zeroPage [64 << 10]byte

// zero reports whether b holds only zero bytes. Other bytes are found
// at once: a chunk of data almost never starts with a page of zeros.
func zero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:k], zeroPage[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// fill reads from r until b is full or r ends (io.EOF). Unlike io.ReadFull
// it passes every other error on as it is: a body cut short
// (io.ErrUnexpectedEOF from net/http) must fail the write, not end it.
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// A putter runs chunk Puts in the background, a few at a time, and
// remembers what it started so that a failed Write can take it back.
type putter struct {
	ctx    context.Context // ended by the first failed Put
	cancel context.CancelCauseFunc
	s      Store
	slots  chan struct{} // one token per chunk buffer in use
	wg     sync.WaitGroup
	ids    []ChunkID // every chunk a Put was started for
}

func newPutter(ctx context.Context, s Store) *putter {
	ctx, cancel := context.WithCancelCause(ctx)
	return &putter{ctx: ctx, cancel: cancel, s: s, slots: make(chan struct{}, window)}
}

// acquire waits for a free buffer slot and returns a buffer of len size; it
// fails as soon as a Put has failed or the context has ended.
func (p *putter) acquire(size int) (*[]byte, error) {
	if p.ctx.Err() != nil {
		return nil, context.Cause(p.ctx)
	}
	select {
	case p.slots <- struct{}{}:
		return getBuf(size), nil
	case <-p.ctx.Done():
		return nil, context.Cause(p.ctx)
	}
}

// release gives back a buffer and its slot.
func (p *putter) release(buf *[]byte) {
	putBuf(buf)
	<-p.slots
}

// put stores the first n bytes of buf as chunk id in the background, then
// calls done.
func (p *putter) put(id ChunkID, buf *[]byte, n int, done func()) {
	p.ids = append(p.ids, id)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer done()
		if err := p.s.Put(p.ctx, id, (*buf)[:n]); err != nil {
			p.cancel(err)
		}
	}()
}

// wait waits for every Put; if one failed or the context ended, it cleans
// up as fail does.
func (p *putter) wait() error {
	p.wg.Wait()
	if p.ctx.Err() != nil {
		return p.fail(context.Cause(p.ctx))
	}
	return nil
}

// fail stops further Puts, waits for those running, deletes every chunk a
// Put was started for and returns the first failure: a failed Put's error
// rather than the cancellation it caused in the others.
func (p *putter) fail(err error) error {
	p.cancel(err)
	p.wg.Wait()
	deleteChunks(p.ctx, p.s, p.ids)
	return context.Cause(p.ctx)
}

// deleteChunks deletes chunks nothing will name, best effort: whatever
// remains is garbage for the collector. It runs even if ctx has ended.
func deleteChunks(ctx context.Context, s Store, ids []ChunkID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, id := range ids {
		_ = s.Delete(ctx, id)
	}
}

// Overwrite stores a new version of m's bytes with [off, off+n) replaced by
// the next n bytes of r, growing m when the range passes its end (a gap
// before off reads as zeros; n = 0 with off past the end just grows m).
// It rewrites only the range Widen picks, reading the bytes around the
// edit back from s, and shares the rest of m: a 1-byte edit of a 1 GiB
// object writes one chunk. r ending early is io.ErrUnexpectedEOF. On
// error the chunks it wrote are deleted. It may return m itself.
func Overwrite(ctx context.Context, s Store, m *Manifest, off, n int64, r io.Reader, o WriteOptions) (*Manifest, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("overwrite %d+%d: %w", off, n, ErrRange)
	}
	if off > m.Size && len(m.Inline) == 0 {
		// The gap up to off is a hole: nothing to write for it.
		m, _ = join(m, hole(off-m.Size)) // no inline bytes: cannot fail
	}
	if n == 0 && off <= m.Size {
		return m, nil
	}
	o = o.withDefaults()
	woff, wn := m.Widen(off, n, int64(o.ChunkSize))
	wend := woff + wn
	if woff > 0 || wend < m.Size {
		// The result keeps some of m's chunks, which inline bytes cannot
		// join (Widen rewrites an inline m whole).
		o.InlineMax = -1
	}
	old := NewReaderAt(s, m)
	body := io.MultiReader(
		old.section(ctx, woff, min(off, m.Size)),
		io.LimitReader(zeros{}, off-min(off, m.Size)),
		&exactReader{r: r, n: n},
		old.section(ctx, off+n, min(wend, m.Size)),
	)
	w, err := Write(ctx, s, body, o)
	if err != nil {
		return nil, fmt.Errorf("overwrite %d+%d: %w", off, n, err)
	}
	res, err := m.Splice(woff, min(wend, m.Size)-woff, w.Manifest)
	if err != nil {
		deleteChunks(ctx, s, w.Manifest.ChunkIDs())
		return nil, fmt.Errorf("overwrite %d+%d: %w", off, n, err)
	}
	return res, nil
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// exactReader reads exactly n bytes of r: ending early is
// io.ErrUnexpectedEOF, and it never reads past them.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	k, err := e.r.Read(p)
	e.n -= int64(k)
	if err == io.EOF && e.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return k, err
}
