package fs

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// maxStreams bounds the files streamed at once: each holds up to three
// chunk buffers (see data.Write) while it is open.
const maxStreams = 4

// maxStreamAge bounds how long a stream runs before its bytes are staged:
// its chunks are referenced by no row until the file is committed, and
// the collector deletes such chunks once they are older than its grace
// period (an hour by default).
const maxStreamAge = 10 * time.Minute

// errAbandoned ends the stream of a draft discarded without a commit.
var errAbandoned = errors.New("the file was discarded before its commit")

// A stream takes the writes of a file written from its start and in
// order, the way most files are written (cp, tar, compilers, editors
// saving): they go through a pipe straight into object.Put, which cuts,
// hashes and stores the chunks as they come, so the bytes are written
// once, not staged first, and a close or fsync has only the last chunk
// left to store. The Put is prepared, not committed: the draft queues it
// when the file is committed (see draft.commit).
type stream struct {
	key string
	w   *io.PipeWriter
	n   int64 // the bytes written so far
	// attrs are the attributes the file ended with: set by end, before
	// the pipe is closed, and read by the Put once the body has ended.
	attrs object.Attrs

	old  *time.Timer   // stages the stream when it has run too long
	done chan struct{} // closed when the Put has returned
	p    *object.Pending
	v    *meta.Version
	err  error
}

// startStream starts a stream of a new version of key with attributes a,
// or returns nil when maxStreams are running. spill is called with the
// stream once it has run for maxStreamAge.
func (f *fsys) startStream(key string, a object.Attrs, spill func(*stream)) *stream {
	select {
	case f.streams <- struct{}{}:
	default:
		return nil
	}
	r, w := io.Pipe()
	s := &stream{key: key, w: w, done: make(chan struct{})}
	s.old = time.AfterFunc(maxStreamAge, func() { spill(s) })
	go func() {
		defer close(s.done)
		defer func() { <-f.streams }()
		// The stream outlives the request that started it.
		ctx := context.Background()
		s.p, s.err = f.svc.Prepare(ctx, func(d *object.Service) (err error) {
			s.v, err = d.Put(ctx, f.bucket, key, r, object.PutOptions{Attrs: a, Size: -1, Finish: s.finish, CRC32C: true})
			return err
		})
		// A Put that failed stopped reading: the next write must fail,
		// not wait.
		r.CloseWithError(s.err)
	}()
	return s
}

// finish completes the row from the attributes the file ended with.
func (s *stream) finish(v *meta.Version) error {
	v.POSIX, v.UserMeta = s.attrs.POSIX, s.attrs.UserMeta
	return nil
}

// write appends p.
func (s *stream) write(p []byte) error {
	n, err := s.w.Write(p)
	s.n += int64(n)
	return err
}

// end closes the stream, the file having attributes a, and returns the
// prepared version of what was written.
func (s *stream) end(a object.Attrs) (*object.Pending, *meta.Version, error) {
	s.old.Stop()
	p := *a.POSIX
	a.POSIX = &p
	s.attrs = a
	s.w.Close()
	<-s.done
	return s.p, s.v, s.err
}

// abandon ends the stream and drops what was written.
func (s *stream) abandon() {
	s.old.Stop()
	s.w.CloseWithError(errAbandoned)
	<-s.done
}
