package cassandra

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/stratafs/stratafs/meta"
)

// orphanTables are the tables partitioned by (bucket_id, shard).
var orphanTables = []string{"objects", "uploads"}

// OrphanBuckets reads the partition keys of the objects and uploads
// tables (SELECT DISTINCT: one row per partition, not per record), then
// the bucket records of every namespace of the keyspace: rows carry no
// namespace, so a bucket of another store sharing the keyspace is live
// too. Partitions are read first, so a bucket created in between has its
// record by the time the records are read. The scans run under ctx, not
// the store's timeout: they read the whole table.
func (s *Store) OrphanBuckets(ctx context.Context) ([]meta.Bucket, error) {
	top := map[uint64]int{} // bucket id → highest shard seen
	for _, table := range orphanTables {
		it := s.session.Query(fmt.Sprintf("SELECT DISTINCT bucket_id, shard FROM %s.%s", s.q.keyspace, table)).IterContext(ctx)
		var id int64
		var shard int
		for it.Scan(&id, &shard) {
			top[uint64(id)] = max(top[uint64(id)], shard)
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("orphan buckets: partitions of %s: %w", table, s.wrap(ctx, err))
		}
	}
	live, err := s.liveIDs(ctx)
	if err != nil {
		return nil, err
	}
	var orphans []meta.Bucket
	for id, shard := range top {
		if !live[id] {
			orphans = append(orphans, meta.Bucket{ID: id, Shards: 1 << bits.Len(uint(shard))})
		}
	}
	return orphans, nil
}

// DropOrphan deletes each of b's partitions that holds anything, with one
// partition deletion: a plain write, not LWT, which is safe because
// nothing reads a dead bucket's rows. A write racing the deletion with a
// later timestamp survives it, and the next collection finds it.
func (s *Store) DropOrphan(ctx context.Context, b meta.Bucket) (int, error) {
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("drop orphan bucket %x: %w", b.ID, err)
	}
	live, err := s.liveIDs(ctx)
	if err != nil {
		return fail(err)
	}
	if live[b.ID] {
		return fail(fmt.Errorf("the bucket exists: %w", meta.ErrInvalidArgument))
	}
	if !validShards(b.Shards) {
		return fail(fmt.Errorf("%d shards: %w", b.Shards, meta.ErrInvalidArgument))
	}
	n := 0
	for _, table := range orphanTables {
		probe := fmt.Sprintf("SELECT bucket_id FROM %s.%s WHERE bucket_id = ? AND shard = ? LIMIT 1", s.q.keyspace, table)
		drop := fmt.Sprintf("DELETE FROM %s.%s WHERE bucket_id = ? AND shard = ?", s.q.keyspace, table)
		for shard := range int(b.Shards) {
			err := s.bounded(ctx, func(ctx context.Context) error {
				var id int64
				it := s.session.Query(probe, int64(b.ID), shard).IterContext(ctx)
				found := it.Scan(&id)
				if err := it.Close(); err != nil || !found {
					return err
				}
				n++
				return s.session.Query(drop, int64(b.ID), shard).ExecContext(ctx)
			})
			if err != nil {
				return fail(fmt.Errorf("%s shard %d: %w", table, shard, err))
			}
		}
	}
	return n, nil
}

// liveIDs returns the ids of the buckets of every namespace.
func (s *Store) liveIDs(ctx context.Context) (map[uint64]bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	bs, err := readAll(ctx, s, meta.UnmarshalBucket, fmt.Sprintf("SELECT data FROM %s.buckets", s.q.keyspace))
	if err != nil {
		return nil, fmt.Errorf("bucket records: %w", s.wrap(ctx, err))
	}
	live := make(map[uint64]bool, len(bs))
	for _, b := range bs {
		live[b.ID] = true
	}
	return live, nil
}
