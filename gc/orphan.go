package gc

import (
	"context"
	"fmt"
)

// orphans drops what is stored under bucket ids that no bucket has (see
// meta.Orphans): the rows, uploads and parts a write racing DeleteBucket
// left. Nothing reads them, and the scan, which walks live buckets only,
// marks none of their chunks, so the sweep that follows takes those too.
// They are removed a batch per commit; a dry run only counts the ids.
func (r *run) orphans(ctx context.Context) error {
	orphans, err := r.meta.OrphanBuckets(ctx)
	if err != nil {
		return err
	}
	for _, b := range orphans {
		r.st.OrphanBuckets++
		r.log.Warn("records of a deleted bucket found", "bucket_id", fmt.Sprintf("%x", b.ID), "dry_run", r.o.DryRun)
		for !r.o.DryRun {
			n, err := r.meta.DropOrphan(ctx, b)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			r.st.OrphanRecords += int64(n)
			r.report("orphans", "", "")
		}
	}
	return nil
}
