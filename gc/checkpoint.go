package gc

import (
	"context"
	"errors"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// checkpointEvery is how often the retention pass saves where it got to:
// a process killed outright redoes at most this much of the pass. A run
// that stops short otherwise (its context ends, its lease is lost, the
// store fails) saves it as it stops.
var checkpointEvery = 5 * time.Second

// resume reads the checkpoint an interrupted run left and returns where
// the retention pass starts: after the key after of buckets[start] (""
// for its first). A checkpoint whose bucket is gone (deleted, or created
// again under its name with another id) is ignored, and so is one that
// cannot be read: it only decides where the pass begins.
func (r *run) resume(ctx context.Context, buckets []meta.Bucket) (start int, after string) {
	r.saved = time.Now()
	c, err := r.meta.Checkpoint(ctx, LeaseName)
	switch {
	case errors.Is(err, meta.ErrNoSuchCheckpoint):
		return 0, ""
	case err != nil:
		r.log.Warn("the retention pass starts at the first bucket: its checkpoint cannot be read", "err", err)
		return 0, ""
	}
	for i, b := range buckets {
		if b.ID == c.Bucket {
			r.st.ResumedBucket, r.st.ResumedKey = b.Name, c.Key
			r.log.Info("retention pass resumed where an interrupted run stopped",
				"bucket", b.Name, "after", c.Key, "saved", c.Saved, "by", c.Holder)
			return i, c.Key
		}
	}
	r.log.Info("checkpoint ignored: its bucket is gone", "bucket_id", c.Bucket, "key", c.Key, "saved", c.Saved, "by", c.Holder)
	return 0, ""
}

// progressed notes that the pass finished key of b, and saves it when
// checkpointEvery has passed since the last save.
func (r *run) progressed(ctx context.Context, b meta.Bucket, key string) {
	if !r.checkpoint {
		return
	}
	r.done = &meta.Checkpoint{Name: LeaseName, Holder: r.o.Holder, Bucket: b.ID, Key: key}
	if time.Since(r.saved) >= checkpointEvery {
		r.save(ctx)
	}
}

// save writes the checkpoint. It is advisory: a failure only costs the
// next run the work redone, so it is logged, not returned.
func (r *run) save(ctx context.Context) {
	r.saved = time.Now()
	r.done.Saved = r.svc.Now()
	if err := r.meta.SaveCheckpoint(ctx, *r.done); err != nil {
		r.log.Warn("checkpoint not saved", "bucket_id", r.done.Bucket, "key", r.done.Key, "err", err)
	}
}

// interrupted saves where the pass stopped, even though the run's
// context has ended; a run that finished no key leaves the checkpoint it
// found.
func (r *run) interrupted(ctx context.Context) {
	if !r.checkpoint || r.done == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	r.save(ctx)
}

// completed removes the checkpoint once the pass went over every key:
// the next run starts at the first bucket.
func (r *run) completed(ctx context.Context) {
	if !r.checkpoint {
		return
	}
	if err := r.meta.DeleteCheckpoint(ctx, LeaseName); err != nil {
		r.log.Warn("checkpoint not removed", "err", err)
	}
}
