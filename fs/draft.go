package fs

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A draft is the uncommitted state of a file open for writing: the version
// it edits (its base) and what was done to it since. Written bytes are
// staged at their file offsets in an unlinked temporary file, so memory
// stays bounded whatever is written; unwritten bytes are read from the
// base. Every handle of a file shares its draft, so they see each other's
// writes as on a local disk.
//
// A file written from its start and in order is streamed instead (see
// stream): its bytes go straight to the chunk store; its first maxHeld
// bytes are held in memory until they are passed, so that a small file
// is put whole by its commit. Any other access (a read, a write
// elsewhere, a truncation) ends the stream (or the holding) first, and so
// does its age (see maxStreamAge): what was streamed is copied to the
// staging file, and the draft goes on as if it had been staged all along.
// The staging file is only created when a write needs it: creating one
// costs about as much as creating a file.
//
// A commit turns the draft into one new version (see commit) and rebases
// the draft on it. The staging file holds zeros everywhere outside the
// dirty ranges, so when nothing of the base survives it is the file.
type draft struct {
	fsys *fsys
	refs int // handles using the draft; guarded by the file node's mutex

	mu     sync.Mutex
	base   *meta.Version  // nil for a file not committed yet
	baseR  *object.Reader // holds the base's chunks against the collector
	stage  *os.File       // nil until needed
	stream *stream        // the file's bytes so far, while they are streamed
	// held is the file's bytes so far, while it is written from its
	// start in order and they are no more than maxHeld: a small file is
	// put whole when it is committed, with no stream and no staging.
	held []byte
	// broken is why the draft's bytes are lost: a stream that failed.
	broken error
	dirty  extents
	keep   int64 // the bytes [0, keep) of the base are still the file's
	size   int64
	attrs  object.Attrs // of the next version; POSIX always set
	// data and meta say whether the bytes or only the attributes changed
	// since the base: they decide how a commit writes the new version.
	data, meta bool
	// wrote is set by the first write since the base.
	wrote bool
	// closed says that a close(2) committed the draft (see settled).
	closed bool
}

// maxHeld bounds the bytes a draft holds in memory (see draft.held): a
// stream costs a goroutine and a pipe, more than a small file's commit.
const maxHeld = 64 << 10

// newDraft starts a draft of base, or, when base is nil, of a new empty
// file with attributes attrs (whose POSIX must be set).
func (f *fsys) newDraft(base *meta.Version, attrs object.Attrs) (*draft, error) {
	d := &draft{fsys: f, attrs: attrs, data: base == nil}
	if base != nil {
		if err := d.rebase(base); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// rebase makes v the draft's base, with nothing changed since. A base
// with chunks is held against the collector from now on. One without (a
// small file's inline bytes) holds nothing, and its reader is made when
// the draft first reads it (see baseReader): most drafts never do, and
// making it decodes the manifest. Left out of every create's FLUSH, that
// took a 4 KiB create in BenchmarkMountCreate from 161–184 µs of CPU
// (median 180) to 157–172 (median 162), and 36 to 31.5 KB allocated (6
// alternating runs each, 2026-12-04).
func (d *draft) rebase(v *meta.Version) error {
	var r *object.Reader
	if v.NoManifest || data.Chunked(v.Manifest) {
		var err error
		if r, err = d.fsys.svc.ReaderAt(context.Background(), v); err != nil {
			return err
		}
	}
	if d.baseR != nil {
		d.baseR.Close()
	}
	if d.stage != nil {
		if err := d.stage.Truncate(0); err != nil {
			return err
		}
	}
	d.base, d.baseR, d.dirty, d.held = v, r, nil, nil
	d.keep, d.size = v.Size, v.Size
	d.attrs = d.fsys.attrsOf(v, false)
	d.data, d.meta, d.wrote, d.closed = false, false, false, false
	return nil
}

// baseReader returns the reader of the base's bytes, making it on first
// use when rebase left it for later. d.mu must be held.
func (d *draft) baseReader(ctx context.Context) (*object.Reader, error) {
	if d.baseR == nil {
		r, err := d.fsys.svc.ReaderAt(ctx, d.base)
		if err != nil {
			return nil, err
		}
		d.baseR = r
	}
	return d.baseR, nil
}

// staging returns the staging file, creating it on first use. It is
// unlinked at once, so that a crash leaves nothing behind.
func (d *draft) staging() (*os.File, error) {
	if d.stage != nil {
		return d.stage, nil
	}
	f, err := os.CreateTemp(d.fsys.opts.StagingDir, "draft-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	d.stage = f
	return f, nil
}

// close lets go of the draft, dropping what was not committed.
func (d *draft) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stream != nil {
		d.stream.abandon()
		d.stream = nil
	}
	if d.baseR != nil {
		d.baseR.Close()
	}
	if d.stage == nil {
		return nil
	}
	return d.stage.Close()
}

// atEnd, as the offset of a write, is where the file ends (O_APPEND).
const atEnd = -1

// writeAt writes p at off, or at the end if off is atEnd, and returns
// where it wrote. key names the file, for a stream to start; ok is false
// when it has none (the file was unlinked).
func (d *draft) writeAt(p []byte, off int64, key func() (string, bool)) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken != nil {
		return 0, d.broken
	}
	if off == atEnd {
		off = d.size
	}
	// A file written from its start in order is held while it is small,
	// then streamed.
	fromStart := d.stream == nil && d.keep == 0 && len(d.dirty) == 0 &&
		d.size == int64(len(d.held)) && off == d.size
	switch {
	case fromStart && off+int64(len(p)) <= maxHeld:
		d.held = append(d.held, p...)
	case fromStart && d.startStream(key), d.stream != nil && off == d.stream.n:
		if err := d.stream.write(p); err != nil {
			d.broken = err
			return 0, err
		}
	default:
		if err := d.unstream(); err != nil {
			return 0, err
		}
		stage, err := d.staging()
		if err != nil {
			return 0, err
		}
		if _, err := stage.WriteAt(p, off); err != nil {
			return 0, err
		}
		d.dirty.add(off, int64(len(p)))
	}
	d.size = max(d.size, off+int64(len(p)))
	d.wrote = true
	d.touch()
	return off, nil
}

// startStream starts streaming the file, the bytes held so far first,
// and reports whether it could: not when the file has been unlinked, nor
// while maxStreams files are streamed.
func (d *draft) startStream(key func() (string, bool)) bool {
	k, ok := key()
	if !ok {
		return false
	}
	s := d.fsys.startStream(k, d.attrs, d.spillOld)
	if s == nil {
		return false
	}
	d.stream = s
	held := d.held
	d.held = nil
	if err := s.write(held); err != nil {
		d.broken = err
	}
	return true
}

// unstream ends the stream, if there is one, and stages what it took:
// the bytes are copied to the staging file and the version the stream
// prepared is dropped, its chunks left to the collector. A version that
// is never committed must not outlive the collector's grace period: its
// chunks are referenced by no row. Bytes held are staged likewise.
func (d *draft) unstream() error {
	if len(d.held) > 0 {
		return d.stageHeld()
	}
	s := d.stream
	if s == nil {
		return d.broken
	}
	d.stream = nil
	_, v, err := s.end(d.attrs)
	if err == nil {
		err = d.stageAll(v)
	}
	if err != nil {
		d.broken = err
	}
	return err
}

// stageHeld moves the bytes held to the staging file.
func (d *draft) stageHeld() error {
	stage, err := d.staging()
	if err != nil {
		return err
	}
	if _, err := stage.WriteAt(d.held, 0); err != nil {
		return err
	}
	d.dirty.add(0, int64(len(d.held)))
	d.held = nil
	return nil
}

// stageAll copies the bytes of v, which d streamed, to the staging file.
func (d *draft) stageAll(v *meta.Version) error {
	ctx := context.Background()
	r, err := d.fsys.svc.ReaderAt(ctx, v)
	if err != nil {
		return err
	}
	defer r.Close()
	stage, err := d.staging()
	if err != nil {
		return err
	}
	buf := make([]byte, min(v.Size, 1<<20))
	for off := int64(0); off < v.Size; {
		n, err := r.ReadAt(ctx, buf[:min(int64(len(buf)), v.Size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if _, err := stage.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	d.dirty.add(0, v.Size)
	return nil
}

// spillOld stages the stream s once it has run for maxStreamAge, if it
// is still the draft's.
func (d *draft) spillOld(s *stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stream == s {
		d.unstream()
	}
}

// emptied reports whether the file was created or truncated empty and
// nothing has been written since. A shell redirection (open, dup2,
// close, then the writes) closes such a file before writing it; a close
// then leaves the commit to the release, so that the file gets one
// version, not an empty one first.
func (d *draft) emptied() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.data && d.size == 0 && !d.wrote
}

// markClosed records that a close(2) has just committed the draft.
func (d *draft) markClosed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
}

// settled reports whether a close(2) committed the draft and nothing has
// changed since. The kernel sends the release of a closed handle after
// close(2) has returned, so such a draft may outlive its writer: a
// handle opened then reads the version committed, as after the release,
// rather than share the draft with the next writer.
func (d *draft) settled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed && !d.data && !d.meta
}

// touch records a change of the bytes now.
func (d *draft) touch() {
	d.data = true
	d.attrs.POSIX.Mtime = time.Now()
}

// truncate cuts or grows the file to size; grown bytes read as zeros.
func (d *draft) truncate(size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.resize(size)
}

func (d *draft) resize(size int64) error {
	if err := d.unstream(); err != nil {
		return err
	}
	if size < d.size {
		if d.stage != nil {
			if err := d.stage.Truncate(size); err != nil {
				return err
			}
		}
		d.dirty.cut(size)
		d.keep = min(d.keep, size)
	}
	d.size = size
	d.touch()
	return nil
}

// setattr applies a SETATTR: a truncation and the attributes to store.
func (d *draft) setattr(in *fuse.SetAttrIn) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if size, ok := in.GetSize(); ok {
		if err := d.resize(int64(size)); err != nil {
			return err
		}
	}
	if changesPOSIX(in) {
		setPOSIX(d.attrs.POSIX, in)
		d.meta = true
	}
	return nil
}

// setUserMeta replaces the user metadata the next version gets.
func (d *draft) setUserMeta(m map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attrs.UserMeta = m
	d.meta = true
}

// userMeta returns the user metadata the next version gets.
func (d *draft) userMeta() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attrs.UserMeta
}

// extends reports whether the draft only adds bytes past the end of its
// base, version id.
func (d *draft) extends(id meta.VersionID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.base == nil || d.base.ID != id || d.keep < d.base.Size || d.size < d.base.Size {
		return false
	}
	return len(d.dirty) == 0 || d.dirty[0].Off >= d.base.Size
}

// length returns the file's size as written so far.
func (d *draft) length() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.size
}

// attr fills out with the file's attributes as written so far.
func (d *draft) attr(out *fuse.Attr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ctime := d.attrs.POSIX.Mtime
	if d.base != nil && !d.data && !d.meta {
		ctime = d.base.LastModified()
	}
	setAttr(out, *d.attrs.POSIX, d.size, ctime)
}

// readAt reads the file as written so far.
func (d *draft) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.readAtLocked(ctx, p, off)
}

func (d *draft) readAtLocked(ctx context.Context, p []byte, off int64) (int, error) {
	if err := d.unstream(); err != nil {
		return 0, err
	}
	if off >= d.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), d.size-off)]
	for done := 0; done < len(p); {
		pos := off + int64(done)
		q := p[done:]
		if i := d.dirty.find(pos); i < len(d.dirty) && d.dirty[i].Off <= pos {
			q = q[:min(int64(len(q)), d.dirty[i].End()-pos)]
			if _, err := d.stage.ReadAt(q, pos); err != nil {
				return done, err
			}
		} else {
			if i < len(d.dirty) {
				q = q[:min(int64(len(q)), d.dirty[i].Off-pos)]
			}
			// Bytes of the base up to keep; zeros past it.
			b := max(0, min(int64(len(q)), d.keep-pos))
			if b > 0 {
				r, err := d.baseReader(ctx)
				if err != nil {
					return done, err
				}
				if _, err := r.ReadAt(ctx, q[:b], pos); err != nil && !errors.Is(err, io.EOF) {
					return done, err
				}
			}
			clear(q[b:])
		}
		done += len(q)
	}
	return len(p), nil
}

// body returns the file's bytes when nothing of the base survives: the
// bytes held, or else the staging file, which holds zeros outside the
// ranges written.
func (d *draft) body() (io.Reader, error) {
	if d.size == int64(len(d.held)) {
		// Held bytes are only ever appended to, and dropped once put.
		return data.NewHeld(d.held), nil
	}
	stage, err := d.staging()
	if err != nil {
		return nil, err
	}
	if err := stage.Truncate(d.size); err != nil {
		return nil, err
	}
	return io.NewSectionReader(stage, 0, d.size), nil
}

// lockedReader reads a draft whose mutex its caller holds, for a commit.
type lockedReader struct {
	ctx context.Context
	d   *draft
}

func (r lockedReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.d.readAtLocked(r.ctx, p, off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// commit prepares the draft as one new version of key, queues it and
// rebases the draft on it; it returns nil when nothing changed since the
// base. failed is called should the queued commit fail. How the version
// is written depends on what changed:
//
//   - only attributes: a metadata-only version sharing the base's bytes
//     (fsys.update, which folds it into the base's version while that
//     waits in the journal: last is the change that queued it), or the
//     latest bytes of key if the file has moved since the base (with its
//     directory: object.UpdateAttrs);
//   - the file was streamed: the stream's Put;
//   - nothing of the base survives (a new file, or one truncated to zero
//     and rewritten): the staging file is the file, stored by object.Put;
//   - otherwise: object.Edit rewrites only the chunks the dirty ranges
//     touch and shares the rest with the base.
//
// A version whose bytes were written here has an opaque ETag, and a Put
// keeps the CRC-32C of the file's bytes as its checksum (see
// object.PutOptions.CRC32C); one of new attributes only keeps its base's.
//
// Edits are last-writer-wins against changes made meanwhile by others:
// the version committed is the base with this draft's changes applied.
func (d *draft) commit(ctx context.Context, key string, last *change, failed func(error)) (*meta.Version, *change, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fsys
	if s := d.stream; s != nil && s.key == key {
		d.stream = nil
		p, v, err := s.end(d.attrs)
		if err != nil {
			d.broken = err
			return nil, nil, err
		}
		return v, f.j.add(p, failed), d.rebase(v)
	}
	// A stream of another key: the file has moved with its directory, or
	// the stream was cut short. Bytes held are the whole file: they are
	// put as they are (see body).
	if len(d.held) == 0 {
		if err := d.unstream(); err != nil {
			return nil, nil, err
		}
	}
	if !d.data && !d.meta {
		return nil, nil, nil
	}
	a := d.attrs
	moved := d.base != nil && d.base.Key != key
	if !d.data && !moved {
		v, c, err := f.update(ctx, last, d.base, false, failed, func(cur *object.Attrs) error {
			*cur = a
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		return v, c, d.rebase(v)
	}
	if moved {
		f.j.settle(key)
	}
	var v *meta.Version
	c, err := f.queue(ctx, failed, func(s *object.Service) (err error) {
		switch {
		case !d.data:
			v, err = s.UpdateAttrs(ctx, f.bucket, key, func(_ *meta.Version, cur *object.Attrs) error {
				cur.POSIX, cur.UserMeta = a.POSIX, a.UserMeta
				return nil
			})
		case d.keep == 0:
			body, berr := d.body()
			if berr != nil {
				return berr
			}
			v, err = s.Put(ctx, f.bucket, key, body, object.PutOptions{Attrs: a, Size: d.size, CRC32C: true})
		default:
			a.Checksums = nil
			rewrite := slices.Clone(d.dirty)
			rewrite.add(d.keep, min(d.base.Size, d.size)-d.keep) // cut, then grown again: zeros
			v, err = s.Edit(ctx, f.bucket, key, d.base, object.EditOptions{
				Attrs: a,
				Size:  d.size,
				Dirty: rewrite,
				Src:   lockedReader{ctx: ctx, d: d},
			})
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return v, c, d.rebase(v)
}
