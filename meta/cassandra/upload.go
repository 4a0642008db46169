package cassandra

import (
	"bytes"
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

// An upload lives in its key's shard of the uploads table: the record in
// kind 0, its parts in kind 1, so that PutPart can write a part under the
// condition that the record is still Uploading, in one partition.

// errUploadIDTaken refuses a second upload under an id in use. Ids are
// random, so only a caller that reuses one meets it.
var errUploadIDTaken = fmt.Errorf("upload id in use: %w", meta.ErrInvalidArgument)

// uploadName validates an upload's key and id and returns the shard its
// records live in.
func uploadName(b meta.Bucket, key, id string) (int, error) {
	n, err := shards(b)
	if err == nil {
		err = meta.ValidKey(key)
	}
	if err == nil {
		err = meta.ValidUploadID(id)
	}
	if err != nil {
		return 0, err
	}
	return shardOf(key, n), nil
}

// upArgs returns the arguments that name the record of upload (key, id).
func upArgs(b meta.Bucket, shard int, key, id string) []any {
	return []any{int64(b.ID), shard, []byte(key), []byte(id)}
}

// upload reads the upload (key, id) at consistency c, and its stored form.
func (s *Store) upload(ctx context.Context, c gocql.Consistency, b meta.Bucket, shard int, key, id string) (*meta.Upload, []byte, error) {
	data, err := s.getAt(ctx, c, s.q.upload, upArgs(b, shard, key, id)...)
	if err != nil {
		return nil, nil, err
	}
	if data == nil {
		return nil, nil, meta.ErrNoSuchUpload
	}
	u, err := unmarshalUpload(data, key, id)
	return u, data, err
}

// unmarshalUpload decodes an upload record and checks it against its
// name.
func unmarshalUpload(data []byte, key, id string) (*meta.Upload, error) {
	u, err := meta.UnmarshalUpload(data)
	if err == nil && (u.Key != key || u.ID != id) {
		err = fmt.Errorf("%w: upload %s of %q stored as %s of %q", meta.ErrCorrupt, u.ID, u.Key, id, key)
	}
	return u, err
}

// CreateUpload records u, which must be in state Uploading, in bucket b
// if b still exists.
func (s *Store) CreateUpload(ctx context.Context, b meta.Bucket, u *meta.Upload) error {
	if u == nil {
		return fmt.Errorf("create upload in %s: nil upload: %w", b.Name, meta.ErrInvalidArgument)
	}
	// Marshal first: it refuses a malformed id as the caller's invalid
	// argument, where uploadName would not find the upload.
	data, err := meta.MarshalUpload(u)
	var shard int
	if err == nil {
		shard, err = uploadName(b, u.Key, u.ID)
	}
	if err == nil && u.State != meta.Uploading {
		err = fmt.Errorf("new upload in state %s: %w", u.State, meta.ErrInvalidArgument)
	}
	if err == nil {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		err = s.liveBucket(ctx, b)
		if err == nil {
			r := record{s.q.createUpload, s.q.upload, upArgs(b, shard, u.Key, u.ID)}
			err = s.lwt(ctx, partition{tableUploads, b.ID, shard}, func(unsure bool) (bool, error) {
				return true, s.create(ctx, r, data, unsure, errUploadIDTaken)
			})
		}
		err = s.wrap(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("create upload %s of %s/%s: %w", u.ID, b.Name, u.Key, err)
	}
	return nil
}

// Upload returns the upload (key, id).
func (s *Store) Upload(ctx context.Context, b meta.Bucket, key, id string) (*meta.Upload, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	shard, err := uploadName(b, key, id)
	var u *meta.Upload
	if err == nil {
		u, _, err = s.upload(ctx, s.cons, b, shard, key, id)
	}
	if err != nil {
		return nil, fmt.Errorf("upload %s of %s/%s: %w", id, b.Name, key, s.wrap(ctx, err))
	}
	return u, nil
}

// UpdateUpload applies fn to the upload (key, id) under compare-and-set:
// the write holds only if the record is still the one fn saw.
func (s *Store) UpdateUpload(ctx context.Context, b meta.Bucket, key, id string, fn func(*meta.Upload) error) (*meta.Upload, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	shard, err := uploadName(b, key, id)
	var u *meta.Upload
	if err == nil {
		var written []byte
		err = s.lwt(ctx, partition{tableUploads, b.ID, shard}, func(unsure bool) (bool, error) {
			cur, data, err := s.upload(ctx, s.serial, b, shard, key, id)
			if err != nil {
				return false, err
			}
			u = cur
			if unsure && bytes.Equal(data, written) {
				return true, nil
			}
			if err := fn(u); err != nil {
				return false, err
			}
			if u.Key != key || u.ID != id {
				return false, fmt.Errorf("update must not change the key or id: %w", meta.ErrInvalidArgument)
			}
			if written, err = meta.MarshalUpload(u); err != nil {
				return false, err
			}
			if bytes.Equal(written, data) {
				return true, nil
			}
			args := append([]any{written, int8(u.State)}, append(upArgs(b, shard, key, id), data)...)
			return s.session.Query(s.q.updateUpload, args...).MapScanCASContext(ctx, map[string]any{})
		})
	}
	if err != nil {
		return nil, fmt.Errorf("update upload %s of %s/%s: %w", id, b.Name, key, s.wrap(ctx, err))
	}
	return u, nil
}

// DeleteUpload removes the upload (key, id) and its parts.
func (s *Store) DeleteUpload(ctx context.Context, b meta.Bucket, key, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	shard, err := uploadName(b, key, id)
	if err == nil {
		err = s.lwt(ctx, partition{tableUploads, b.ID, shard}, func(unsure bool) (bool, error) {
			applied, err := s.execCAS(ctx,
				stmt{s.q.deleteUpload, upArgs(b, shard, key, id)},
				stmt{s.q.delParts, upArgs(b, shard, key, id)})
			switch {
			case err != nil:
				return false, err
			case !applied && !unsure: // after an unknown outcome, gone is gone
				return false, meta.ErrNoSuchUpload
			}
			return true, nil
		})
	}
	if err != nil {
		return fmt.Errorf("delete upload %s of %s/%s: %w", id, b.Name, key, s.wrap(ctx, err))
	}
	return nil
}

// ListUploads returns up to o.Limit uploads in (key, id) order, all of
// them if o.Limit ≤ 0, merging the bucket's shards as Scan does.
func (s *Store) ListUploads(ctx context.Context, b meta.Bucket, o meta.UploadListOptions) ([]*meta.Upload, error) {
	us, err := s.listUploads(ctx, b, o)
	if err != nil {
		return nil, fmt.Errorf("list uploads of %s: %w", b.Name, err)
	}
	return us, nil
}

func (s *Store) listUploads(ctx context.Context, b meta.Bucket, o meta.UploadListOptions) ([]*meta.Upload, error) {
	n, err := shards(b)
	if err != nil {
		return nil, err
	}
	start := pos{key: o.Prefix}
	if o.AfterKey != "" {
		// Past every upload of AfterKey, or past the one named.
		after := pos{key: o.AfterKey + "\x00"}
		if o.AfterID != "" {
			after = pos{o.AfterKey, []byte(o.AfterID)}.next()
		}
		if after.compare(start) > 0 {
			start = after
		}
	}
	m := s.newMerge(ctx, n, s.fetcher(b.ID, s.q.scanUploads, s.q.scanUploadsTo), start, meta.PrefixEnd(o.Prefix))
	var us []*meta.Upload
	for o.Limit <= 0 || len(us) < o.Limit {
		it, ok := m.next()
		if !ok {
			break
		}
		u, err := unmarshalUpload(it.data, it.key, string(it.id))
		if err != nil {
			return nil, err
		}
		if o.Completed || u.State != meta.Completed {
			us = append(us, u)
		}
	}
	return us, m.err
}

// PutPart stores p in the same conditional batch as a no-op write of the
// upload's record that requires it to be Uploading: once Complete moved
// it on, its parts are fixed.
func (s *Store) PutPart(ctx context.Context, b meta.Bucket, key, id string, p *meta.Part) error {
	if p == nil {
		return fmt.Errorf("put part of upload %s of %s/%s: nil part: %w", id, b.Name, key, meta.ErrInvalidArgument)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	shard, err := uploadName(b, key, id)
	var data []byte
	if err == nil {
		data, err = meta.MarshalPart(p)
	}
	if err == nil {
		err = s.lwt(ctx, partition{tableUploads, b.ID, shard}, func(unsure bool) (bool, error) {
			applied, err := s.execCAS(ctx,
				stmt{s.q.guardUpload, upArgs(b, shard, key, id)},
				stmt{s.q.putPart, append(upArgs(b, shard, key, id), p.Number, data)})
			if err != nil || applied {
				return applied, err
			}
			if unsure {
				// The part is there as written: the earlier attempt took.
				cur, err := s.get(ctx, s.q.part, append(upArgs(b, shard, key, id), p.Number)...)
				if err != nil || bytes.Equal(cur, data) {
					return err == nil, err
				}
			}
			return false, fmt.Errorf("upload is missing or no longer uploading: %w", meta.ErrNoSuchUpload)
		})
	}
	if err != nil {
		return fmt.Errorf("put part %d of upload %s of %s/%s: %w", p.Number, id, b.Name, key, s.wrap(ctx, err))
	}
	return nil
}

// Parts returns up to limit parts of the upload (key, id) numbered above
// after, all of them if limit ≤ 0.
func (s *Store) Parts(ctx context.Context, b meta.Bucket, key, id string, after int32, limit int) ([]*meta.Part, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	shard, err := uploadName(b, key, id)
	if err == nil {
		_, _, err = s.upload(ctx, s.cons, b, shard, key, id)
	}
	var ps []*meta.Part
	if err == nil {
		args := append(upArgs(b, shard, key, id), after)
		q := s.q.parts
		if limit > 0 {
			q, args = s.q.partsTo, append(args, limit)
		}
		ps, err = readAll(ctx, s, meta.UnmarshalPart, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("parts of upload %s of %s/%s: %w", id, b.Name, key, s.wrap(ctx, err))
	}
	return ps, nil
}

// finishUpload moves the upload mu completes from Completing to
// Completed and removes its parts, once mu's row is written.
func (s *Store) finishUpload(ctx context.Context, b meta.Bucket, mu *mutation) error {
	key, id := mu.Key, mu.CompleteUpload
	return s.lwt(ctx, partition{tableUploads, b.ID, mu.shard}, func(unsure bool) (bool, error) {
		u, data, err := s.upload(ctx, s.serial, b, mu.shard, key, id)
		switch {
		case err != nil:
			return false, err
		case unsure && u.State == meta.Completed:
			return true, nil
		case u.State != meta.Completing:
			return false, fmt.Errorf("upload %s is %s, not completing: %w", id, u.State, meta.ErrNoSuchUpload)
		}
		u.State = meta.Completed
		done, err := meta.MarshalUpload(u)
		if err != nil {
			return false, err
		}
		return s.execCAS(ctx,
			stmt{s.q.updateUpload, append([]any{done, int8(u.State)}, append(upArgs(b, mu.shard, key, id), data)...)},
			stmt{s.q.delParts, upArgs(b, mu.shard, key, id)})
	})
}
