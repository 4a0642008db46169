package gc

import (
	"context"
	"errors"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// DefaultInterval is how often a Worker collects by default.
const DefaultInterval = time.Hour

// A Worker collects in the background, for a long-running process such
// as `stratafs serve`: a run at start and then every Interval. Where
// several processes share a meta store each may run one; the lease lets
// one of them collect at a time and the others skip their turn.
type Worker struct {
	Interval time.Duration // between the starts of runs; DefaultInterval when 0
	Options  Options       // Options.DryRun runs without changing anything
	// Done, if set, is called after each run with its counts and error;
	// the error is meta.ErrLeaseHeld when another collector had the
	// lease (and the counts are empty).
	Done func(*Stats, error)
}

// Run collects until ctx ends, and then returns ctx's error.
func (w *Worker) Run(ctx context.Context, svc *object.Service) error {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	o := w.Options.withDefaults()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		st, err := Run(ctx, svc, o)
		switch {
		case errors.Is(err, meta.ErrLeaseHeld):
			o.Logger.Debug("collection skipped: another collector holds the lease", "err", err)
		case err != nil && ctx.Err() == nil:
			o.Logger.Error("collection failed", "err", err)
		}
		if w.Done != nil {
			w.Done(st, err)
		}
		t.Reset(interval)
	}
}
