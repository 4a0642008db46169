package data

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"
	"time"
)

// Defaults for WriteOptions.
const (
	DefaultChunkSize = 8 << 20
	DefaultInlineMax = 4096
)

// window is how many chunks one Write has in progress at most: one
// being written while the others are made durable. Over a store that is
// not a StreamStore each holds a chunk buffer.
const window = 3

// pieceSize and pieces size the buffers a body streams through on its way
// to its chunks: one being filled from the body and written to its chunk
// while the others wait to be hashed. 256 KiB makes the write and the
// channel send per piece cost nothing beside MD5's 0.4 ms for its bytes,
// and keeps the four of them (1 MiB) in one core's L2 cache (2 MiB here,
// at least 1 MiB on current server cores), so that writing a piece to a
// file reads from the cache what reading it from the body just put there.
const (
	pieceSize = 256 << 10
	pieces    = 4
)

// cleanupTimeout bounds the best-effort deletion of a failed write's
// chunks, which runs even when the caller's context has ended.
const cleanupTimeout = time.Minute

// WriteOptions tune Write.
type WriteOptions struct {
	// ChunkSize is the size bodies are cut into (DefaultChunkSize when
	// 0). Over a store that is not a StreamStore, a Write holds up to
	// three buffers of this size.
	ChunkSize int
	// InlineMax is the largest body stored inside the manifest, with no
	// chunk and no fsync (DefaultInlineMax when 0; negative: never). It is
	// capped below ChunkSize. Write multipart parts with a negative
	// InlineMax: Concat cannot join inline bytes with chunks.
	InlineMax int
	// Digest is the hash taken of the body (MD5 when 0).
	Digest Digest
}

// A Digest names a hash Write takes of a body as it streams.
type Digest uint8

const (
	// MD5 is what S3 clients expect as the ETag of a body PUT whole. One
	// stream's MD5 runs at about 650 MB/s on one core: for a single
	// writer it is the bound of a write's speed.
	MD5 Digest = iota
	// CRC32C (Castagnoli, big-endian) costs about a twentieth of MD5's
	// CPU with the CPU's CRC instructions. S3 keeps it as a full-object
	// checksum that clients verify on GET.
	CRC32C
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sum returns the digest d of b, a small body's: hashed at once, never
// by md5-simd.
func (d Digest) sum(b []byte) []byte {
	if d == CRC32C {
		return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, castagnoli))
	}
	s := md5.Sum(b)
	return s[:]
}

// hash returns a new hash of kind d and the func that gives it back (see
// newMD5).
func (d Digest) hash() (hash.Hash, func()) {
	if d == CRC32C {
		return crc32.New(castagnoli), func() {}
	}
	return newMD5()
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
	Sum      []byte // the body's digest, of the kind WriteOptions.Digest names
}

// Write stores the body r as chunks and returns its manifest, size and
// digest. It streams, through four piece buffers of 256 KiB: hashing a piece
// (on another core) overlaps reading the next, and making a chunk durable
// overlaps writing the next ones. A StreamStore gets each piece as it
// arrives; any other store gets whole chunks from buffers of ChunkSize,
// three at most.
// When Write returns nil every chunk is durable, so a version row may name
// them. On error it returns after every Commit it started has finished,
// having deleted (best effort) the chunks it wrote.
func Write(ctx context.Context, s Store, r io.Reader, o WriteOptions) (*WriteResult, error) {
	o = o.withDefaults()
	m := new(Manifest)
	if h, ok := r.(*Held); ok && h.off == 0 && len(h.b) <= o.InlineMax {
		h.off = len(h.b)
		m.Size, m.Inline = int64(len(h.b)), h.b
		return &WriteResult{Manifest: m, Size: m.Size, Sum: o.Digest.sum(h.b)}, nil
	}
	// Read a small body's bytes on their own first, so that it creates no
	// chunk (and takes no chunk buffer).
	if o.InlineMax >= 0 {
		head := make([]byte, o.InlineMax+1)
		n, err := fill(r, head)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		// A body of exactly InlineMax+1 bytes may end with this read too; it
		// goes to a chunk, and the loop below reads the EOF again.
		if head = head[:n]; err == io.EOF && n <= o.InlineMax {
			m.Size, m.Inline = int64(n), head
			return &WriteResult{Manifest: m, Size: m.Size, Sum: o.Digest.sum(head)}, nil
		}
		r = io.MultiReader(bytes.NewReader(head), r)
	}
	p := newPutter(ctx, s, o.ChunkSize)
	defer p.cancel(nil)
	hs := newHasher(o.Digest)
	defer hs.close()
	for {
		id, w, n, end, err := p.chunk(r, hs)
		if err != nil {
			return nil, p.fail(err)
		}
		m.Size += int64(n)
		switch {
		case w != nil:
			m.Chunks = append(m.Chunks, &Chunk{Id: id[:], Length: int64(n)})
			p.commit(id, w)
		case n == 0:
		case len(m.Chunks) > 0 && m.Chunks[len(m.Chunks)-1].Hole():
			m.Chunks[len(m.Chunks)-1].Length += int64(n)
		default:
			// Stored nowhere: a hole (sparse files, zero-filled images).
			m.Chunks = append(m.Chunks, &Chunk{Length: int64(n)})
		}
		if end {
			break
		}
	}
	sum := hs.sum()
	if err := p.wait(); err != nil {
		return nil, err
	}
	return &WriteResult{Manifest: m, Size: m.Size, Sum: sum}, nil
}

// Held is a body whose bytes are all in memory and are not changed once
// it is passed to Write (a file the mount holds until it is closed).
// Write keeps a small one's bytes in the manifest as they are, where it
// copies those of any other reader: a 4 KiB file created in the mount
// made 31 KB of garbage, 4.8 of it that copy.
type Held struct {
	b   []byte
	off int
}

// NewHeld returns a Held body of b.
func NewHeld(b []byte) *Held { return &Held{b: b} }

func (h *Held) Read(p []byte) (int, error) {
	if h.off == len(h.b) {
		return 0, io.EOF
	}
	n := copy(p, h.b[h.off:])
	h.off += n
	return n, nil
}

// A hasher feeds piece buffers, in order, to a hash (of a Digest) in
// a goroutine of its own, so that hashing one piece overlaps reading the
// next, and gives them back.
type hasher struct {
	slots    chan struct{} // one token per piece buffer in use
	in       chan hashed
	done     chan struct{}
	h        hash.Hash
	giveBack func() // gives back h; nil once called
}

// A hashed piece is the first n bytes of a piece buffer.
type hashed struct {
	buf *[]byte
	n   int
}

func newHasher(d Digest) *hasher {
	in := make(chan hashed, pieces)
	h, giveBack := d.hash()
	hs := &hasher{slots: make(chan struct{}, pieces), in: in, done: make(chan struct{}), h: h, giveBack: giveBack}
	go func() {
		defer close(hs.done)
		for pc := range in {
			h.Write((*pc.buf)[:pc.n])
			hs.release(pc.buf)
		}
	}()
	return hs
}

// acquire waits for a free piece buffer. The hasher never stops giving
// them back, so this needs no context.
func (hs *hasher) acquire() *[]byte {
	hs.slots <- struct{}{}
	return getBuf(pieceSize)
}

func (hs *hasher) release(buf *[]byte) {
	putBuf(buf)
	<-hs.slots
}

// hash queues the first n bytes of buf, which it gives back once hashed.
func (hs *hasher) hash(buf *[]byte, n int) { hs.in <- hashed{buf, n} }

// finish waits until everything queued is hashed; it may be called again.
func (hs *hasher) finish() {
	if hs.in != nil {
		close(hs.in)
		hs.in = nil
	}
	<-hs.done
}

// sum returns the digest of everything queued, and closes hs.
func (hs *hasher) sum() []byte {
	hs.finish()
	s := hs.h.Sum(nil)
	hs.close()
	return s
}

// close finishes and gives the hash back, on every path out of Write (an
// md5-simd hash not given back holds its server open); it may be called
// again.
func (hs *hasher) close() {
	hs.finish()
	if hs.giveBack != nil {
		hs.giveBack()
		hs.giveBack = nil
	}
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

// A putter writes chunks and commits them in the background, a few at a
// time, and remembers what it committed so that a failed Write can take
// it back.
type putter struct {
	ctx    context.Context // ended by the first failed Commit
	cancel context.CancelCauseFunc
	s      Store
	size   int           // the chunk size
	slots  chan struct{} // one token per chunk in progress
	wg     sync.WaitGroup
	ids    []ChunkID // every chunk a Commit was started for
}

func newPutter(ctx context.Context, s Store, size int) *putter {
	ctx, cancel := context.WithCancelCause(ctx)
	return &putter{ctx: ctx, cancel: cancel, s: s, size: size, slots: make(chan struct{}, window)}
}

// chunk reads the next chunk of r, up to the chunk size, a piece at a
// time, writes it to a new chunk id and queues it to be hashed. It creates
// the chunk at its first byte that is not zero: a chunk of zeros is stored
// nowhere, and w is then nil. end reports that r has ended. On error
// nothing of the chunk is left.
func (p *putter) chunk(r io.Reader, hs *hasher) (id ChunkID, w ChunkWriter, n int, end bool, err error) {
	defer func() {
		if err != nil && w != nil {
			w.Abort()
		}
	}()
	for n < p.size && !end {
		if p.ctx.Err() != nil {
			return id, w, n, end, context.Cause(p.ctx)
		}
		buf := hs.acquire()
		k, rerr := fill(r, (*buf)[:min(pieceSize, p.size-n)])
		b := (*buf)[:k]
		switch end = rerr == io.EOF; {
		case rerr != nil && !end:
			err = fmt.Errorf("reading body: %w", rerr)
		case w == nil && !zero(b):
			if id, w, err = p.create(); err == nil {
				err = writeAll(w, b, n)
			}
		case w != nil:
			_, err = w.Write(b)
		}
		hs.hash(buf, k)
		if err != nil {
			return id, w, n, end, err
		}
		n += k
	}
	return id, w, n, end, nil
}

// writeAll writes b to w after the n zero bytes that came before it.
func writeAll(w io.Writer, b []byte, n int) error {
	if n > 0 {
		if _, err := io.CopyN(w, zeros{}, int64(n)); err != nil {
			return err
		}
	}
	_, err := w.Write(b)
	return err
}

// create waits for a free slot and starts a new chunk in it; it fails as
// soon as a Commit has failed or the context has ended.
func (p *putter) create() (ChunkID, ChunkWriter, error) {
	id := NewChunkID()
	select {
	case p.slots <- struct{}{}:
	case <-p.ctx.Done():
		return id, nil, context.Cause(p.ctx)
	}
	ss, ok := p.s.(StreamStore)
	if !ok {
		return id, &bufferedChunk{s: p.s, id: id, buf: getBuf(p.size), release: p.release}, nil
	}
	w, err := ss.CreateChunk(id)
	if err != nil {
		p.release()
		return id, nil, err
	}
	return id, &slotChunk{w, p.release}, nil
}

// release gives back a chunk's slot.
func (p *putter) release() { <-p.slots }

// A slotChunk is a StreamStore's chunk that holds a slot of its Write.
type slotChunk struct {
	ChunkWriter
	release func()
}

func (c *slotChunk) Commit(ctx context.Context) error {
	err := c.ChunkWriter.Commit(ctx)
	c.done()
	return err
}

func (c *slotChunk) Abort() {
	c.ChunkWriter.Abort()
	c.done()
}

// done gives back the slot, once.
func (c *slotChunk) done() {
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// A bufferedChunk gathers a chunk in a buffer of the chunk size for a
// store that takes only whole chunks, and Puts it on Commit.
type bufferedChunk struct {
	s       Store
	id      ChunkID
	buf     *[]byte
	n       int
	release func() // gives back the slot
}

func (c *bufferedChunk) Write(b []byte) (int, error) {
	k := copy((*c.buf)[c.n:], b)
	c.n += k
	if k < len(b) {
		return k, fmt.Errorf("chunk %s: %w", c.id, io.ErrShortWrite)
	}
	return k, nil
}

func (c *bufferedChunk) Commit(ctx context.Context) error {
	defer c.Abort()
	return c.s.Put(ctx, c.id, (*c.buf)[:c.n])
}

func (c *bufferedChunk) Abort() {
	if c.buf != nil {
		putBuf(c.buf)
		c.buf = nil
		c.release()
	}
}

// commit makes chunk id, written to w, durable in the background.
func (p *putter) commit(id ChunkID, w ChunkWriter) {
	p.ids = append(p.ids, id)
	p.wg.Go(func() {
		if err := w.Commit(p.ctx); err != nil {
			p.cancel(err)
		}
	})
}

// wait waits for every Commit; if one failed or the context ended, it
// cleans up as fail does.
func (p *putter) wait() error {
	p.wg.Wait()
	if p.ctx.Err() != nil {
		return p.fail(context.Cause(p.ctx))
	}
	return nil
}

// fail stops further Commits, waits for those running, deletes every chunk
// a Commit was started for and returns the first failure: a failed
// Commit's error rather than the cancellation it caused in the others.
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
