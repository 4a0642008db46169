package gc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/object"
)

// FsckOptions tune Fsck.
type FsckOptions struct {
	// Repair condemns orphan chunks older than Grace (DefaultGrace when
	// 0) and deletes those condemned at least Grace before, under the
	// collector's lease, as a run of the collector would. Rows that name
	// missing chunks are reported, never changed.
	Repair bool
	Grace  time.Duration
	// Missing, if set, is told of every reference to a chunk that is
	// absent, shorter than its manifest says or unreadable.
	Missing func(Missing)
	// Orphan, if set, is told of every chunk nothing references; of those
	// older than the grace period once the run decided on them.
	Orphan   func(Orphan)
	Progress func(Progress)
	Holder   string
	LeaseTTL time.Duration
	Logger   *slog.Logger
}

// A Missing is a row or upload part whose manifest names a chunk the
// chunk store cannot serve in full.
type Missing struct {
	Bucket, Key string
	VersionID   string // the row's wire id; "" for a part
	UploadID    string // the part's upload
	Part        int32
	Chunk       data.ChunkID
	// Err is data.ErrNoSuchChunk for an absent chunk, io.ErrUnexpectedEOF
	// for one shorter than a range of the manifest, or the read error.
	Err error
}

// Fsck checks that every chunk every row and upload part references
// exists and is as long as the manifest needs (a one-byte read of the
// last byte of each range the manifest takes from it), and finds the
// chunks nothing references. A row found damaged is read again before it
// is reported, so one removed while the check ran is not. It reports
// through o's callbacks and returns the counts (Missing and Damaged,
// Unreferenced, Condemned and Reclaimed: what Repair did or would do). An
// unreadable manifest (Stats.Unreadable) turns Repair off: chunks it may
// name must not be taken for orphans.
func Fsck(ctx context.Context, svc *object.Service, o FsckOptions) (*Stats, error) {
	r := newRun(svc, Options{
		DryRun:   !o.Repair,
		Grace:    o.Grace,
		Holder:   o.Holder,
		LeaseTTL: o.LeaseTTL,
		Progress: o.Progress,
		Logger:   o.Logger,
	}.withDefaults())
	r.check = func(Missing) {}
	if o.Missing != nil {
		r.check = o.Missing
	}
	err := r.locked(ctx, func(ctx context.Context) error {
		if err := r.scan(ctx, false); err != nil {
			return err
		}
		if r.st.Unreadable > 0 && !r.o.DryRun {
			r.log.Warn("not repairing: some manifests cannot be read", "unreadable", r.st.Unreadable)
			r.o.DryRun = true
		}
		return r.sweep(ctx, o.Orphan)
	})
	return r.finish(), err
}

// probe reads the last byte each range of m needs from each of its
// chunks and reports those that fail, unless alive says the row or part
// is gone by then.
func (r *run) probe(ctx context.Context, m *data.Manifest, where Missing, alive func() bool) {
	ends := make(map[data.ChunkID]int64, len(m.Chunks))
	for _, c := range m.Chunks {
		if c.Hole() { // stored nowhere
			continue
		}
		id := data.ChunkID(c.Id)
		ends[id] = max(ends[id], c.Offset+c.Length)
	}
	var found []Missing
	for _, id := range m.ChunkIDs() {
		var b [1]byte
		n, err := r.svc.Data().ReadAt(ctx, id, b[:], ends[id]-1)
		switch {
		case n == 1:
			continue
		case err == nil || errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF
		case ctx.Err() != nil:
			return
		}
		w := where
		w.Chunk, w.Err = id, err
		found = append(found, w)
	}
	if len(found) == 0 || !alive() {
		return
	}
	r.st.Damaged++
	for _, f := range found {
		r.st.Missing++
		r.check(f)
	}
}
