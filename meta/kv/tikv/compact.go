package tikv

import (
	"context"
	"time"

	"github.com/tikv/client-go/v2/oracle"
)

// Compact advances the cluster's GC safe point to before, after resolving
// the locks of transactions that started earlier (client-go's
// KVStore.GC), so that TiKV discards every value overwritten or deleted
// before then. Without it nothing ever advances the safe point of a
// cluster that has no TiDB, and every version of every record is kept
// forever. The safe point is the cluster's, not this prefix's: it only
// moves forward, so a TiDB or another instance on the same cluster that
// keeps it further back is not disturbed, and one that moves it further
// ahead wins. Lock resolution scans the whole cluster; it runs under
// ctx, not the engine's per-call timeout.
func (e *engine) Compact(ctx context.Context, before time.Time) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return errClosed
	}
	if _, err := e.s.GC(ctx, oracle.GoTimeToTS(before)); err != nil {
		return failed(ctx, "compact", err)
	}
	return nil
}
