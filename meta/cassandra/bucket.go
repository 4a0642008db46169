package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

var bucketsPartition = partition{table: tableBuckets}

// CreateBucket inserts b unless a bucket of that name exists. With
// Options.Shards set, the bucket gets that shard count.
func (s *Store) CreateBucket(ctx context.Context, b meta.Bucket) error {
	if s.shards != 0 {
		b.Shards = s.shards
	}
	err := meta.ValidBucketName(b.Name)
	if err == nil {
		_, err = shards(b)
	}
	var data []byte
	if err == nil {
		data, err = meta.MarshalBucket(b)
	}
	if err == nil {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		err = s.wrap(ctx, s.lwt(ctx, bucketsPartition, func(unsure bool) (bool, error) {
			r := record{s.q.createBucket, s.q.bucket, []any{s.ns, b.Name}}
			return true, s.create(ctx, r, data, unsure, meta.ErrBucketExists)
		}))
	}
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", b.Name, err)
	}
	return nil
}

// A record is a one-blob record that a create inserts if it is absent:
// the CQL that inserts it (taking key, then the blob), the CQL that
// reads it (taking key), and its key.
type record struct {
	insert, get string
	key         []any
}

// create inserts data as r, failing with exists if r is there already —
// unless, after a write of unknown outcome, what is there is data: then
// the earlier write took.
func (s *Store) create(ctx context.Context, r record, data []byte, unsure bool, exists error) error {
	applied, err := s.session.Query(r.insert, append(r.key[:len(r.key):len(r.key)], data)...).MapScanCASContext(ctx, map[string]any{})
	if err != nil || applied {
		return err
	}
	if unsure {
		cur, err := s.get(ctx, r.get, r.key...)
		if err == nil && bytes.Equal(cur, data) {
			return nil
		}
	}
	return exists
}

// readAll decodes every one-column record cql selects.
func readAll[T any](ctx context.Context, s *Store, decode func([]byte) (T, error), cql string, args ...any) ([]T, error) {
	var out []T
	it := s.session.Query(cql, args...).IterContext(ctx)
	var derr error
	for data := []byte(nil); derr == nil && it.Scan(&data); {
		var r T
		if r, derr = decode(data); derr == nil {
			out = append(out, r)
		}
	}
	err := it.Close()
	if err == nil {
		err = derr
	}
	return out, err
}

// get reads the one-column record getCQL selects: nil if there is none.
func (s *Store) get(ctx context.Context, getCQL string, args ...any) ([]byte, error) {
	return s.getAt(ctx, s.cons, getCQL, args...)
}

// getAt is get at consistency c.
func (s *Store) getAt(ctx context.Context, c gocql.Consistency, getCQL string, args ...any) ([]byte, error) {
	var data []byte
	err := s.session.Query(getCQL, args...).Consistency(c).ScanContext(ctx, &data)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	return data, err
}

// Bucket returns the named bucket.
func (s *Store) Bucket(ctx context.Context, name string) (meta.Bucket, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	b, _, err := s.bucket(ctx, s.cons, name)
	if err != nil {
		return meta.Bucket{}, fmt.Errorf("bucket %s: %w", name, s.wrap(ctx, err))
	}
	return b, nil
}

// bucket reads the named bucket at consistency c, and its stored form.
func (s *Store) bucket(ctx context.Context, c gocql.Consistency, name string) (meta.Bucket, []byte, error) {
	data, err := s.getAt(ctx, c, s.q.bucket, s.ns, name)
	if err != nil {
		return meta.Bucket{}, nil, err
	}
	if data == nil {
		return meta.Bucket{}, nil, meta.ErrNoSuchBucket
	}
	b, err := unmarshalBucket(data, name)
	return b, data, err
}

// unmarshalBucket decodes a bucket record and checks it against its name.
func unmarshalBucket(data []byte, name string) (meta.Bucket, error) {
	b, err := meta.UnmarshalBucket(data)
	if err == nil && b.Name != name {
		err = fmt.Errorf("%w: bucket %q stored under %q", meta.ErrCorrupt, b.Name, name)
	}
	return b, err
}

// liveBucket checks that b is still the bucket of its name: a write into
// a bucket that was deleted, or deleted and created again, fails with
// ErrNoSuchBucket. It also refuses a record whose shard count is not the
// stored one (a caller that kept what it passed to CreateBucket while
// Options.Shards replaced the count), which would put rows where no read
// looks for them.
func (s *Store) liveBucket(ctx context.Context, b meta.Bucket) error {
	cur, _, err := s.bucket(ctx, s.cons, b.Name)
	switch {
	case err != nil:
		return err
	case cur.ID != b.ID:
		return meta.ErrNoSuchBucket
	case cur.Shards != b.Shards:
		return fmt.Errorf("bucket record with %d shards, the stored one has %d: %w", b.Shards, cur.Shards, meta.ErrInvalidArgument)
	}
	return nil
}

// Buckets returns every bucket, ordered by name: the clustering order of
// the namespace's partition.
func (s *Store) Buckets(ctx context.Context) ([]meta.Bucket, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	bs, err := readAll(ctx, s, meta.UnmarshalBucket, s.q.buckets, s.ns)
	if err != nil {
		return nil, fmt.Errorf("buckets: %w", s.wrap(ctx, err))
	}
	return bs, nil
}

// UpdateBucket applies fn to the named bucket under compare-and-set: the
// write holds only if the record is still the one fn saw.
func (s *Store) UpdateBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) (meta.Bucket, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var b meta.Bucket
	var written []byte
	err := s.lwt(ctx, bucketsPartition, func(unsure bool) (bool, error) {
		old, data, err := s.bucket(ctx, s.serial, name)
		if err != nil {
			return false, err
		}
		if unsure && bytes.Equal(data, written) {
			return true, nil
		}
		b = old
		if err := fn(&b); err != nil {
			return false, err
		}
		if b.Name != old.Name || b.ID != old.ID || b.Shards != old.Shards {
			return false, fmt.Errorf("update must not change the name, id or shards: %w", meta.ErrInvalidArgument)
		}
		if written, err = meta.MarshalBucket(b); err != nil {
			return false, err
		}
		if bytes.Equal(written, data) {
			return true, nil
		}
		return s.session.Query(s.q.updateBucket, written, s.ns, name, data).MapScanCASContext(ctx, map[string]any{})
	})
	if err != nil {
		return meta.Bucket{}, fmt.Errorf("update bucket %s: %w", name, s.wrap(ctx, err))
	}
	return b, nil
}

// DeleteBucket removes the named bucket if it has no rows and no upload
// in progress. The bucket record goes under the condition that it is
// still the one whose emptiness was checked. A write racing the delete
// can still land under the dead bucket's id after the check; nothing
// reads it there, as ids never repeat.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var b meta.Bucket
	err := s.lwt(ctx, bucketsPartition, func(unsure bool) (bool, error) {
		cur, data, err := s.bucket(ctx, s.serial, name)
		if unsure && errors.Is(err, meta.ErrNoSuchBucket) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		b = cur
		if err := s.checkEmpty(ctx, b); err != nil {
			return false, err
		}
		return s.session.Query(s.q.deleteBucket, s.ns, name, data).MapScanCASContext(ctx, map[string]any{})
	})
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", name, s.wrap(ctx, err))
	}
	// The bucket is gone, and with it every way to reach its upload
	// records: removing them only saves space, and failing to is no
	// failure of the delete.
	_ = s.dropUploads(ctx, b)
	return nil
}

// checkEmpty fails with ErrBucketNotEmpty if b has a row or an upload
// that is not Completed. Every key with rows has a head row, so any row
// at all in a shard means a row of the bucket.
func (s *Store) checkEmpty(ctx context.Context, b meta.Bucket) error {
	n, err := shards(b)
	if err != nil {
		return err
	}
	return fanOut(ctx, int(n), func(ctx context.Context, shard int) error {
		var key []byte
		err := s.session.Query(s.q.anyRow, int64(b.ID), shard).ScanContext(ctx, &key)
		switch {
		case err == nil:
			return fmt.Errorf("key %q has rows: %w", key, meta.ErrBucketNotEmpty)
		case !errors.Is(err, gocql.ErrNotFound):
			return err
		}
		it := s.session.Query(s.q.uploadStates, int64(b.ID), shard).IterContext(ctx)
		var id []byte
		var state int8
		for it.Scan(&key, &id, &state) {
			if meta.UploadState(state) != meta.Completed {
				it.Close()
				return fmt.Errorf("upload %s of %q in progress: %w", id, key, meta.ErrBucketNotEmpty)
			}
		}
		return it.Close()
	})
}

// dropUploads removes what is left of a deleted bucket's uploads: the
// records of completed ones.
func (s *Store) dropUploads(ctx context.Context, b meta.Bucket) error {
	n, err := shards(b)
	if err != nil {
		return err
	}
	return fanOut(ctx, int(n), func(ctx context.Context, shard int) error {
		return s.session.Query(s.q.dropUploads, int64(b.ID), shard).ExecContext(ctx)
	})
}
