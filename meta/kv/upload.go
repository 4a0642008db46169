package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// errUploadIDTaken refuses a second upload under an id in use. Ids are
// random, so only a caller that reuses one meets it.
var errUploadIDTaken = fmt.Errorf("upload id in use: %w", meta.ErrInvalidArgument)

// CreateUpload records u, which must be in state Uploading, in bucket b
// if b still exists (ErrNoSuchBucket otherwise).
func (s *Store) CreateUpload(ctx context.Context, b meta.Bucket, u *meta.Upload) error {
	if u == nil {
		return fmt.Errorf("create upload in %s: nil upload: %w", b.Name, meta.ErrInvalidArgument)
	}
	data, err := meta.MarshalUpload(u)
	if err == nil && u.State != meta.Uploading {
		err = fmt.Errorf("new upload in state %d: %w", u.State, meta.ErrInvalidArgument)
	}
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			if err := liveBucket(tx, b); err != nil {
				return err
			}
			return insert(tx, uploadKey(spaceUpload, b.ID, u.Key, u.ID), data, errUploadIDTaken)
		})
	}
	if err != nil {
		return fmt.Errorf("create upload %s of %s/%s: %w", u.ID, b.Name, u.Key, err)
	}
	return nil
}

// Upload returns the upload (key, id).
func (s *Store) Upload(ctx context.Context, b meta.Bucket, key, id string) (*meta.Upload, error) {
	var u *meta.Upload
	err := checkUploadName(key, id)
	if err == nil {
		err = s.e.View(ctx, func(tx Txn) (err error) {
			u, err = getUpload(tx, b.ID, key, id)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("upload %s of %s/%s: %w", id, b.Name, key, err)
	}
	return u, nil
}

// UpdateUpload applies fn to the upload (key, id) in one transaction.
func (s *Store) UpdateUpload(ctx context.Context, b meta.Bucket, key, id string, fn func(*meta.Upload) error) (*meta.Upload, error) {
	var u *meta.Upload
	err := checkUploadName(key, id)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			cur, err := getUpload(tx, b.ID, key, id)
			if err != nil {
				return err
			}
			if err := fn(cur); err != nil {
				return err
			}
			if cur.Key != key || cur.ID != id {
				return fmt.Errorf("update must not change the key or id: %w", meta.ErrInvalidArgument)
			}
			u = cur
			return setUpload(tx, b.ID, cur)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("update upload %s of %s/%s: %w", id, b.Name, key, err)
	}
	return u, nil
}

// DeleteUpload removes the upload (key, id) and its parts.
func (s *Store) DeleteUpload(ctx context.Context, b meta.Bucket, key, id string) error {
	err := checkUploadName(key, id)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			if err := deleteExisting(tx, uploadKey(spaceUpload, b.ID, key, id), meta.ErrNoSuchUpload); err != nil {
				return err
			}
			return deleteParts(tx, b.ID, key, id)
		})
	}
	if err != nil {
		return fmt.Errorf("delete upload %s of %s/%s: %w", id, b.Name, key, err)
	}
	return nil
}

// ListUploads returns up to o.Limit uploads in (key, id) order, all of
// them if o.Limit ≤ 0.
func (s *Store) ListUploads(ctx context.Context, b meta.Bucket, o meta.UploadListOptions) ([]*meta.Upload, error) {
	start, end := prefixRange(spaceUpload, b.ID, o.Prefix)
	if o.AfterKey != "" {
		// Past every upload of AfterKey (the key's encoding is a prefix of
		// theirs), or past the one named.
		after := successor(keyKey(spaceUpload, b.ID, o.AfterKey))
		if o.AfterID != "" {
			after = append(uploadKey(spaceUpload, b.ID, o.AfterKey, o.AfterID), 0)
		}
		if bytes.Compare(after, start) > 0 {
			start = after
		}
	}
	keep := func(u *meta.Upload) bool { return o.Completed || u.State != meta.Completed }
	var us []*meta.Upload
	err := s.e.View(ctx, func(tx Txn) (err error) {
		us, err = collect(tx, start, end, o.Limit, unmarshalUpload, keep)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list uploads of %s: %w", b.Name, err)
	}
	return us, nil
}

// PutPart stores p, checking in the same transaction that the upload is
// still Uploading: once Complete moved it on, its parts are fixed.
func (s *Store) PutPart(ctx context.Context, b meta.Bucket, key, id string, p *meta.Part) error {
	if p == nil {
		return fmt.Errorf("put part of upload %s of %s/%s: nil part: %w", id, b.Name, key, meta.ErrInvalidArgument)
	}
	err := checkUploadName(key, id)
	var data []byte
	if err == nil {
		data, err = meta.MarshalPart(p)
	}
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			u, err := getUpload(tx, b.ID, key, id)
			if err != nil {
				return err
			}
			if u.State != meta.Uploading {
				return fmt.Errorf("upload %s is no longer uploading: %w", id, meta.ErrNoSuchUpload)
			}
			return tx.Set(partKey(b.ID, key, id, p.Number), data)
		})
	}
	if err != nil {
		return fmt.Errorf("put part %d of upload %s of %s/%s: %w", p.Number, id, b.Name, key, err)
	}
	return nil
}

// Parts returns up to limit parts of the upload (key, id) numbered above
// after, all of them if limit ≤ 0; ErrNoSuchUpload if there is no such
// upload.
func (s *Store) Parts(ctx context.Context, b meta.Bucket, key, id string, after int32, limit int) ([]*meta.Part, error) {
	var ps []*meta.Part
	err := checkUploadName(key, id)
	if err == nil {
		start, end := partRange(b.ID, key, id)
		if after > 0 {
			start = append(partKey(b.ID, key, id, after), 0)
		}
		err = s.e.View(ctx, func(tx Txn) error {
			if _, err := getUpload(tx, b.ID, key, id); err != nil {
				return err
			}
			ps, err = collect(tx, start, end, limit, unmarshalPart, nil)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("parts of upload %s of %s/%s: %w", id, b.Name, key, err)
	}
	return ps, nil
}

// completeUpload moves the upload (key, id) from Completing to Completed
// and removes its parts: Commit runs it beside the version row it built.
func completeUpload(tx Txn, bid uint64, key, id string) error {
	u, err := getUpload(tx, bid, key, id)
	if err == nil && u.State != meta.Completing {
		err = fmt.Errorf("not completing: %w", meta.ErrNoSuchUpload)
	}
	if err != nil {
		return fmt.Errorf("complete upload %s: %w", id, err)
	}
	u.State = meta.Completed
	if err := setUpload(tx, bid, u); err != nil {
		return err
	}
	return deleteParts(tx, bid, key, id)
}

// deleteParts removes every part of the upload (key, id).
func deleteParts(tx Txn, bid uint64, key, id string) error {
	start, end := partRange(bid, key, id)
	return deleteRange(tx, start, end)
}

// checkUploadName validates the names of an upload a caller asks for.
func checkUploadName(key, id string) error {
	if err := meta.ValidKey(key); err != nil {
		return err
	}
	return meta.ValidUploadID(id)
}

// getUpload reads the upload (key, id).
func getUpload(tx Txn, bid uint64, key, id string) (*meta.Upload, error) {
	return get(tx, uploadKey(spaceUpload, bid, key, id), meta.ErrNoSuchUpload, unmarshalUpload)
}

// setUpload writes u.
func setUpload(tx Txn, bid uint64, u *meta.Upload) error {
	data, err := meta.MarshalUpload(u)
	if err != nil {
		return err
	}
	return tx.Set(uploadKey(spaceUpload, bid, u.Key, u.ID), data)
}

// unmarshalUpload decodes an upload record and checks it against its key.
func unmarshalUpload(k, v []byte) (*meta.Upload, error) {
	_, key, id, err := decodeUploadKey(k)
	if err != nil {
		return nil, err
	}
	u, err := meta.UnmarshalUpload(v)
	if err == nil && (u.Key != key || u.ID != id) {
		err = fmt.Errorf("%w: upload %s of %q stored under %s of %q", meta.ErrCorrupt, u.ID, u.Key, id, key)
	}
	return u, err
}

// unmarshalPart decodes a part record and checks it against its key.
func unmarshalPart(k, v []byte) (*meta.Part, error) {
	_, _, _, n, err := decodePartKey(k)
	if err != nil {
		return nil, err
	}
	p, err := meta.UnmarshalPart(v)
	if err == nil && p.Number != n {
		err = fmt.Errorf("%w: part %d stored as part %d", meta.ErrCorrupt, p.Number, n)
	}
	return p, err
}
