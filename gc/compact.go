package gc

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// compact tells a meta store that keeps superseded versions of its
// records (TiKV's MVCC) that those older than the grace period may go:
// no transaction lasts that long. The collector is the one process that
// does it, under its lease, after a run that succeeded.
func (r *run) compact(ctx context.Context) error {
	c, ok := r.meta.(meta.Compactor)
	if !ok || r.o.DryRun {
		return nil
	}
	if err := c.Compact(ctx, r.cutoff); err != nil {
		return fmt.Errorf("compact the meta store: %w", err)
	}
	return nil
}
