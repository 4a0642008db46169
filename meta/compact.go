package meta

import (
	"context"
	"time"
)

// A Compactor is a Store whose backend keeps superseded versions of its
// records (MVCC) until told that no reader needs them: TiKV keeps every
// overwritten and deleted value until the cluster's GC safe point passes
// it. The collector calls Compact after each successful run; stores that
// keep nothing old do not implement it, or do nothing.
type Compactor interface {
	// Compact lets the backend discard the versions of its records that
	// were superseded before the given instant. No transaction of this
	// package runs that long, so none loses its snapshot.
	Compact(ctx context.Context, before time.Time) error
}
