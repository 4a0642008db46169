package meta

import "context"

// Orphans find and remove what a bucket left behind when it was deleted.
// On backends whose DeleteBucket cannot exclude a racing write (TiKV's
// snapshot isolation, Cassandra's per-partition transactions), a commit
// or an upload can land under the dead bucket's id after the emptiness
// check: nothing reads it again, but it takes space forever. The
// collector finds such ids and drops what is stored under them. Bucket
// ids are random and never reused, so an id that no bucket has now will
// never be a live bucket's.
type Orphans interface {
	// OrphanBuckets returns the buckets that have rows or uploads stored
	// but no bucket record: only ID is set, and Shards on backends that
	// shard (enough to cover every shard that holds something).
	OrphanBuckets(ctx context.Context) ([]Bucket, error)
	// DropOrphan removes a batch of what is stored under b, one that
	// OrphanBuckets returned, and says how many records (rows, uploads,
	// parts; partitions on Cassandra) it removed: 0 once nothing is left.
	// The id of a bucket that exists is ErrInvalidArgument.
	DropOrphan(ctx context.Context, b Bucket) (int, error)
}
