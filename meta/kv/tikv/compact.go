package tikv

import (
	"context"
	"fmt"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/oracle"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
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
	safePoint, err := e.s.GC(ctx, oracle.GoTimeToTS(before))
	if err != nil {
		return failed(ctx, "compact", err)
	}
	if e.mock {
		if err := e.collectMock(ctx, safePoint); err != nil {
			return failed(ctx, "compact", err)
		}
	}
	return nil
}

// collectMock does on client-go's mock cluster what a TiKV store does by
// itself once the safe point has passed (its GC runs in RocksDB's
// compaction filter): it drops every value overwritten or deleted at or
// before safePoint, delete records included. The mock drops nothing until
// it is sent the GC command of older TiKVs, region by region; without
// this, a listing among many deleted keys on the mock steps over their
// delete records forever, which a real cluster does not.
func (e *engine) collectMock(ctx context.Context, safePoint uint64) error {
	bo := tikv.NewGcResolveLockMaxBackoffer(ctx)
	for key := []byte{}; ; {
		loc, err := e.s.GetRegionCache().LocateKey(bo, key)
		if err != nil {
			return err
		}
		req := tikvrpc.NewRequest(tikvrpc.CmdGC, &kvrpcpb.GCRequest{SafePoint: safePoint})
		resp, err := e.s.SendReq(bo, req, loc.Region, e.timeout)
		if err != nil {
			return err
		}
		regionErr, err := resp.GetRegionError()
		if err != nil {
			return err
		}
		if regionErr != nil {
			// The region moved or split: look it up again.
			if err := bo.Backoff(tikv.BoRegionMiss(), fmt.Errorf("gc region: %s", regionErr)); err != nil {
				return err
			}
			continue
		}
		if gcErr := resp.Resp.(*kvrpcpb.GCResponse).GetError(); gcErr != nil {
			return fmt.Errorf("gc region %d: %s", loc.Region.GetID(), gcErr)
		}
		if len(loc.EndKey) == 0 {
			return nil
		}
		key = loc.EndKey
	}
}
