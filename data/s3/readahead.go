package s3

import (
	"context"
	"io"
	"slices"
	"sync"

	"github.com/stratafs/stratafs/data"
)

// Read-ahead. The mount reads a file in the kernel's pieces (512 KiB at
// most), and each piece would cost a round trip to the remote; a chunk
// read in order is rather fetched a window at a time, and the pieces are
// copied out of it. Chunks never change, so a window never goes stale;
// Delete drops the windows of its chunk all the same, so that this process
// reads what it deleted as missing.
const (
	// DefaultReadAhead is the window a chunk read in order is fetched by.
	DefaultReadAhead = 2 << 20
	// windows is how many windows are kept: the memory read-ahead takes
	// is at most windows × the window size (16 MiB by default), in flight
	// included.
	windows = 8
	// marks is how many recent reads are remembered to tell reads in
	// order from reads here and there, which read-ahead would only slow.
	marks = 64
)

// readAhead holds the windows most recently used, last in the list.
// Windows are aligned (the window at off holds [off/size*size, +size)),
// so that the kernel's concurrent reads of neighbouring pieces, in
// whatever order they come, share one fetch.
type readAhead struct {
	size int64 // 0: no read-ahead
	mu   sync.Mutex
	wins []*window
	// seen are the windows recent reads ended in: a read in one of those
	// or the next continues a read in order.
	seen [marks]mark
	next int // the mark to overwrite next
}

type mark struct {
	id  data.ChunkID
	win int64
}

// A window is bytes [off, off+size) of a chunk, or fewer when the chunk
// ends first (eof). buf, eof and err are set when done is closed.
type window struct {
	id   data.ChunkID
	off  int64
	buf  []byte
	eof  bool
	err  error
	done chan struct{}
}

// readWindowed serves p from windows when the read is in order: in a
// chunk's first window, or in or next to the window of a recent read. ok
// is false when it did not, and the caller reads p itself.
func (s *Store) readWindowed(ctx context.Context, id data.ChunkID, p []byte, off int64) (n int, err error, ok bool) {
	ra := &s.ra
	if ra.size == 0 || int64(len(p)) >= ra.size {
		return 0, nil, false
	}
	last := (off + int64(len(p)) - 1) / ra.size
	if !ra.inOrder(id, off/ra.size) {
		ra.note(id, last)
		return 0, nil, false
	}
	for {
		at := off + int64(n)
		w := ra.window(s, id, at/ra.size)
		select {
		case <-w.done:
		case <-ctx.Done():
			return n, ctx.Err(), true
		}
		if w.err != nil {
			return n, w.err, true
		}
		if from := at - w.off; from < int64(len(w.buf)) {
			n += copy(p[n:], w.buf[from:])
		}
		switch {
		case n == len(p):
			ra.note(id, last)
			return n, nil, true
		case w.eof:
			return n, io.EOF, true
		}
		// p runs on past the window, into the next one.
	}
}

// inOrder says whether a read in window win of chunk id is in order.
func (ra *readAhead) inOrder(id data.ChunkID, win int64) bool {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return win == 0 || slices.Contains(ra.seen[:], mark{id, win}) || slices.Contains(ra.seen[:], mark{id, win - 1})
}

// note remembers that a read of chunk id ended in window win.
func (ra *readAhead) note(id data.ChunkID, win int64) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.seen[ra.next] = mark{id, win}
	ra.next = (ra.next + 1) % marks
}

// window returns window win of chunk id, fetched, being fetched, or, when
// neither, fetched from now on, evicting the least recently used one. The
// fetch is the window's, not the caller's: it runs to its end (or the
// store's timeout) for whoever waits on it.
func (ra *readAhead) window(s *Store, id data.ChunkID, win int64) *window {
	off := win * ra.size
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for i, w := range slices.Backward(ra.wins) {
		if w.id == id && w.off == off {
			ra.wins = append(slices.Delete(ra.wins, i, i+1), w)
			return w
		}
	}
	w := &window{id: id, off: off, done: make(chan struct{})}
	if len(ra.wins) == windows {
		ra.wins = slices.Delete(ra.wins, 0, 1)
	}
	ra.wins = append(ra.wins, w)
	go func() {
		buf := make([]byte, ra.size)
		n, err := s.read(context.Background(), id, buf, off)
		w.buf = buf[:n]
		switch {
		case err == io.EOF:
			w.eof = true
		case err != nil:
			w.err = err
			ra.drop(id, func(x *window) bool { return x == w })
		}
		close(w.done)
	}()
	return w
}

// drop forgets the windows of chunk id that match.
func (ra *readAhead) drop(id data.ChunkID, match func(*window) bool) {
	ra.mu.Lock()
	ra.wins = slices.DeleteFunc(ra.wins, func(w *window) bool { return w.id == id && match(w) })
	ra.mu.Unlock()
}
