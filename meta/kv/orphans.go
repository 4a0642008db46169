package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// bucketSpaces are the spaces whose keys start with a bucket id.
var bucketSpaces = []byte{spaceVersion, spaceManifest, spaceShared, spaceHolders, spaceLive, spaceNull, spaceUpload, spacePart}

// orphanBatch bounds the keys one DropOrphan deletes, so that its
// transaction stays small (TiKV limits a transaction's size).
const orphanBatch = 1000

// OrphanBuckets finds, in one snapshot, the bucket ids that key some
// record but no bucket record: it reads one key per id and space, seeking
// past the rest of each id's keys.
func (s *Store) OrphanBuckets(ctx context.Context) ([]meta.Bucket, error) {
	var orphans []meta.Bucket
	err := s.e.View(ctx, func(tx Txn) error {
		live, err := liveIDs(tx)
		if err != nil {
			return err
		}
		seen := map[uint64]bool{}
		for _, space := range bucketSpaces {
			for start, end := []byte{space}, []byte{space + 1}; ; {
				var bid uint64
				found := false
				err := tx.Scan(start, end, func(k, _ []byte) bool {
					if len(k) >= 9 {
						bid, found = binary.BigEndian.Uint64(k[1:9]), true
					}
					return false
				})
				if err != nil {
					return err
				}
				if !found {
					break
				}
				if !live[bid] && !seen[bid] {
					seen[bid] = true
					orphans = append(orphans, meta.Bucket{ID: bid})
				}
				if bid == ^uint64(0) {
					break
				}
				start = bucketSpace(space, bid+1, 0)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("orphan buckets: %w", err)
	}
	return orphans, nil
}

// DropOrphan deletes up to orphanBatch keys stored under b.ID, in one
// transaction that first checks that no bucket has that id.
func (s *Store) DropOrphan(ctx context.Context, b meta.Bucket) (int, error) {
	n := 0
	err := s.e.Update(ctx, func(tx Txn) error {
		n = 0
		live, err := liveIDs(tx)
		if err != nil {
			return err
		}
		if live[b.ID] {
			return fmt.Errorf("bucket %x exists: %w", b.ID, meta.ErrInvalidArgument)
		}
		var keys [][]byte
		for _, space := range bucketSpaces {
			if len(keys) == orphanBatch {
				break
			}
			start := bucketSpace(space, b.ID, 0)
			err := tx.Scan(start, successor(start), func(k, _ []byte) bool {
				keys = append(keys, bytes.Clone(k))
				return len(keys) < orphanBatch
			})
			if err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("drop orphan bucket %x: %w", b.ID, err)
	}
	return n, nil
}

// liveIDs returns the ids of every bucket.
func liveIDs(tx Txn) (map[uint64]bool, error) {
	start := []byte{spaceBucket}
	bs, err := collect(tx, start, successor(start), 0, unmarshalBucket, nil)
	if err != nil {
		return nil, err
	}
	live := make(map[uint64]bool, len(bs))
	for _, b := range bs {
		live[b.ID] = true
	}
	return live, nil
}
