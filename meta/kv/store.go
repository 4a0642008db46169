package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// Store implements meta.Store over an Engine.
type Store struct{ e Engine }

var _ meta.Store = (*Store)(nil)

// New returns a Store keeping its records in e; closing the Store closes e.
func New(e Engine) *Store { return &Store{e: e} }

// CreateBucket inserts b unless a bucket of that name exists.
func (s *Store) CreateBucket(ctx context.Context, b meta.Bucket) error {
	if err := meta.ValidBucketName(b.Name); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	data, err := meta.MarshalBucket(b)
	if err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	err = s.e.Update(ctx, func(tx Txn) error {
		return insert(tx, bucketKey(b.Name), data, meta.ErrBucketExists)
	})
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", b.Name, err)
	}
	return nil
}

// Bucket returns the named bucket.
func (s *Store) Bucket(ctx context.Context, name string) (meta.Bucket, error) {
	var b meta.Bucket
	err := s.e.View(ctx, func(tx Txn) (err error) {
		b, err = getBucket(tx, name)
		return err
	})
	if err != nil {
		return meta.Bucket{}, fmt.Errorf("bucket %s: %w", name, err)
	}
	return b, nil
}

// Buckets returns every bucket, ordered by name.
func (s *Store) Buckets(ctx context.Context) ([]meta.Bucket, error) {
	var bs []meta.Bucket
	start := []byte{spaceBucket}
	err := s.e.View(ctx, func(tx Txn) (err error) {
		bs, err = collect(tx, start, successor(start), 0, unmarshalBucket, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("buckets: %w", err)
	}
	return bs, nil
}

// UpdateBucket applies fn to the named bucket in one transaction.
func (s *Store) UpdateBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) (meta.Bucket, error) {
	var b meta.Bucket
	err := s.e.Update(ctx, func(tx Txn) error {
		old, err := getBucket(tx, name)
		if err != nil {
			return err
		}
		b = old
		if err := fn(&b); err != nil {
			return err
		}
		if b.Name != old.Name || b.ID != old.ID {
			return fmt.Errorf("update must not change the name or id: %w", meta.ErrInvalidArgument)
		}
		data, err := meta.MarshalBucket(b)
		if err != nil {
			return err
		}
		return tx.Set(bucketKey(name), data)
	})
	if err != nil {
		return meta.Bucket{}, fmt.Errorf("update bucket %s: %w", name, err)
	}
	return b, nil
}

// DeleteBucket removes the named bucket if it has no rows and no
// multipart upload in progress (S3 refuses to delete a bucket with
// uploads in progress). The records of completed uploads go with it: they
// are kept only to answer a repeated Complete, and listings never show
// them, so they must not keep an emptied bucket alive until the collector
// comes by.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	err := s.e.Update(ctx, func(tx Txn) error {
		b, err := getBucket(tx, name)
		if err != nil {
			return err
		}
		start, end := prefixRange(spaceVersion, b.ID, "")
		empty := true
		if err := tx.Scan(start, end, func(_, _ []byte) bool {
			empty = false
			return false
		}); err != nil {
			return err
		}
		if !empty {
			return meta.ErrBucketNotEmpty
		}
		start, end = prefixRange(spaceUpload, b.ID, "")
		inProgress := func(u *meta.Upload) bool { return u.State != meta.Completed }
		ups, err := collect(tx, start, end, 1, unmarshalUpload, inProgress)
		if err != nil {
			return err
		}
		if len(ups) > 0 {
			return fmt.Errorf("upload %s of %q in progress: %w", ups[0].ID, ups[0].Key, meta.ErrBucketNotEmpty)
		}
		if err := deleteRange(tx, start, end); err != nil {
			return err
		}
		return tx.Delete(bucketKey(name))
	})
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", name, err)
	}
	return nil
}

// getBucket reads the named bucket record.
func getBucket(tx Txn, name string) (meta.Bucket, error) {
	return get(tx, bucketKey(name), meta.ErrNoSuchBucket, unmarshalBucket)
}

// liveBucket checks that b is still the bucket of its name: a write into a
// bucket that was deleted, or deleted and created again, fails with
// ErrNoSuchBucket, so records never land under a dead bucket id.
func liveBucket(tx Txn, b meta.Bucket) error {
	cur, err := getBucket(tx, b.Name)
	if err == nil && cur.ID != b.ID {
		err = meta.ErrNoSuchBucket
	}
	return err
}

// unmarshalBucket decodes a bucket record and checks it against its key.
func unmarshalBucket(k, v []byte) (meta.Bucket, error) {
	name, err := decodeNameKey(k, spaceBucket)
	if err != nil {
		return meta.Bucket{}, err
	}
	b, err := meta.UnmarshalBucket(v)
	if err == nil && b.Name != name {
		err = fmt.Errorf("%w: bucket %q stored under %q", meta.ErrCorrupt, b.Name, name)
	}
	return b, err
}

// Commit applies ms in one engine transaction. A commit into a bucket that
// was deleted, or deleted and created again, fails with ErrNoSuchBucket.
func (s *Store) Commit(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	if len(ms) == 0 {
		return nil
	}
	// Encode outside the transaction: the engine may run it more than once.
	puts := make([]encoded, len(ms))
	for i, m := range ms {
		err := m.Validate()
		// A row sharing another's manifest is encoded once that is read.
		if err == nil && m.Put != nil && m.Put.ManifestOf == nil {
			puts[i], err = encode(m.Put)
		}
		if err != nil {
			return fmt.Errorf("commit %s/%s: %w", b.Name, m.Key, err)
		}
	}
	return s.e.Update(ctx, func(tx Txn) error {
		if err := liveBucket(tx, b); err != nil {
			return fmt.Errorf("commit %s: %w", b.Name, err)
		}
		for i, m := range ms {
			err := apply(tx, b.ID, m, puts[i])
			if err == nil && m.CompleteUpload != "" {
				err = completeUpload(tx, b.ID, m.Key, m.CompleteUpload)
			}
			if err != nil {
				return fmt.Errorf("commit %s/%s: %w", b.Name, m.Key, err)
			}
		}
		return nil
	})
}

// manifestApart is the length past which a row's manifest is kept in an
// M entry of its own. A small file's bytes (up to 4 KiB) are most of its
// row: kept in it, they made bbolt's leaves hold one or two rows each, so
// that a delete marker or a rename rewrote the old row's 8 KiB leaf and
// its bytes again. Apart, a row is a hundred-odd bytes and its key's rows
// share a page. Measured on 2026-12-04 (3 alternating runs each): a mount
// rename of a 4 KiB file (BenchmarkMountRename) 6 % less CPU and 28 %
// less garbage; S3 4 KiB PUT and GET 0–10 % more server CPU (one more
// entry to write or read), 2–4 % fewer objects/s. A rename in the mount
// copies the bytes from one M entry to another without decoding them
// (see shared).
const manifestApart = 512

// An encoded row, as V and M keep it: man is nil unless the manifest is
// kept apart.
type encoded struct{ row, man []byte }

func encode(v *meta.Version) (encoded, error) {
	if len(v.Manifest) <= manifestApart {
		row, err := meta.MarshalVersion(v)
		return encoded{row: row}, err
	}
	row, err := meta.MarshalVersionApart(v)
	return encoded{row, v.Manifest}, err
}

// manifestOf returns the manifest kept apart of row, the stored row (key,
// id); nil if row holds its own.
func manifestOf(tx Txn, bid uint64, key string, id meta.VersionID, row []byte) ([]byte, error) {
	if !meta.IsApart(row) {
		return nil, nil
	}
	man, err := tx.Get(manifestKey(bid, key, id))
	if err == nil && man == nil {
		err = fmt.Errorf("%w: row %q@%s has no manifest", meta.ErrCorrupt, key, id)
	}
	return man, err
}

// shared returns p, a row whose ManifestOf names another, with that
// row's manifest, and encoded. A manifest kept apart is copied as stored,
// never decoded: a rename of a small file moves its bytes from one M
// entry to another and no further. It reads the row as getRow does but
// decodes only what it needs: through getRow (which decodes every
// attribute) BenchmarkRenamePrepared took 53–57 µs of CPU per 4 KiB
// rename instead of 51.
func shared(tx Txn, bid uint64, p *meta.Version) (*meta.Version, encoded, error) {
	ref := p.ManifestOf
	row, err := tx.Get(versionKey(bid, ref.Key, ref.ID))
	if err != nil {
		return nil, encoded{}, err
	}
	var origin *meta.Version
	if row != nil {
		man, err := manifestOf(tx, bid, ref.Key, ref.ID, row)
		switch {
		case err != nil:
			return nil, encoded{}, err
		case man != nil: // a row with a manifest apart is no delete marker
			origin = &meta.Version{Manifest: bytes.Clone(man)}
		default:
			if origin, err = unmarshalRow(row, ref.Key, &ref.ID); err != nil {
				return nil, encoded{}, err
			}
		}
	}
	v, err := p.Sharing(origin)
	if err != nil {
		return nil, encoded{}, err
	}
	data, err := encode(v)
	return v, data, err
}

// apply runs one mutation; put is m.Put encoded, unless m.Put shares
// another row's manifest. It keeps the indexes of the key in step with
// its rows: N names the null row, C holds the attributes of the first row
// while that is not a delete marker.
func apply(tx Txn, bid uint64, m meta.Mutation, put encoded) error {
	headRow, head, err := first(tx, bid, m.Key)
	if err != nil {
		return err
	}
	if m.Check != nil {
		if err := m.Check(head); err != nil {
			return err
		}
	}
	// Before any row goes: the row shared may be one this mutation removes.
	p := m.Put
	if p != nil && p.ManifestOf != nil {
		if p, put, err = shared(tx, bid, p); err != nil {
			return err
		}
	}
	nk := keyKey(spaceNull, bid, m.Key)
	null, err := getID(tx, nk)
	if err != nil {
		return err
	}
	headGone := false
	remove := func(id meta.VersionID) error {
		if err := tx.Delete(versionKey(bid, m.Key, id)); err != nil {
			return err
		}
		if err := tx.Delete(manifestKey(bid, m.Key, id)); err != nil {
			return err
		}
		if null != nil && *null == id {
			null = nil
			if err := tx.Delete(nk); err != nil {
				return err
			}
		}
		headGone = headGone || head != nil && head.ID == id
		return nil
	}

	if m.DropNull && null != nil {
		if err := remove(*null); err != nil {
			return err
		}
	}
	if !m.Delete.IsZero() {
		row, err := tx.Get(versionKey(bid, m.Key, m.Delete))
		if err != nil {
			return err
		}
		if row == nil {
			return fmt.Errorf("version %s: %w", m.Delete, meta.ErrNoSuchVersion)
		}
		if err := remove(m.Delete); err != nil {
			return err
		}
	}
	if p != nil {
		if err := putRow(tx, bid, p, put, head, null); err != nil {
			return err
		}
	}

	// Find the key's new first row.
	next, nextV := headRow, head
	switch {
	case headGone:
		if next, nextV, err = first(tx, bid, m.Key); err != nil {
			return err
		}
	case p != nil && (head == nil || p.ID.Compare(head.ID) < 0):
		next, nextV = put.row, p
	}
	// C is written by every mutation of the key, changed or not: under
	// snapshot isolation (TiKV) only write-write conflicts are caught, and
	// C is the one entry all mutations of a key share, so two racing ones
	// cannot both commit on a stale view of the head.
	ck := keyKey(spaceLive, bid, m.Key)
	if nextV != nil && !nextV.DeleteMarker {
		return tx.Set(ck, meta.VersionAttrs(next))
	}
	return tx.Delete(ck)
}

// putRow writes the new row p (encoded as data) given the key's current
// first row and null row id.
func putRow(tx Txn, bid uint64, p *meta.Version, data encoded, head *meta.Version, null *meta.VersionID) error {
	k := versionKey(bid, p.Key, p.ID)
	// Rows are immutable. Only an id at or after the head's can exist.
	if head != nil && p.ID.Compare(head.ID) >= 0 {
		old, err := tx.Get(k)
		if err != nil {
			return err
		}
		if old != nil {
			return fmt.Errorf("version %s already exists: %w", p.ID, meta.ErrInvalidArgument)
		}
	}
	if err := tx.Set(k, data.row); err != nil {
		return err
	}
	if data.man != nil {
		if err := tx.Set(manifestKey(bid, p.Key, p.ID), data.man); err != nil {
			return err
		}
	}
	if !p.Null {
		return nil
	}
	if null != nil {
		return fmt.Errorf("null version %s exists and the mutation does not drop it: %w", *null, meta.ErrInvalidArgument)
	}
	id := p.ID
	return tx.Set(keyKey(spaceNull, bid, p.Key), id[:])
}

// first returns the attributes of the first row of key, encoded and
// decoded (NoManifest), or nils: a mutation needs no more of its key's
// head, and a small file's row is mostly its inline bytes.
func first(tx Txn, bid uint64, key string) ([]byte, *meta.Version, error) {
	start := keyKey(spaceVersion, bid, key)
	var row []byte
	if err := tx.Scan(start, successor(start), func(_, v []byte) bool {
		row = bytes.Clone(meta.VersionAttrs(v))
		return false
	}); err != nil || row == nil {
		return nil, nil, err
	}
	v, err := unmarshalRow(row, key, nil)
	if err != nil {
		return nil, nil, err
	}
	v.DropManifest()
	return row, v, nil
}

// getID reads a null index entry: nil when absent.
func getID(tx Txn, k []byte) (*meta.VersionID, error) {
	v, err := tx.Get(k)
	if err != nil || v == nil {
		return nil, err
	}
	if len(v) != idLen {
		return nil, fmt.Errorf("%w: null index entry of %d bytes", meta.ErrCorrupt, len(v))
	}
	id := meta.VersionID(v)
	return &id, nil
}

// getRow reads the row (key, id).
func getRow(tx Txn, bid uint64, key string, id meta.VersionID) (*meta.Version, error) {
	v, err := tx.Get(versionKey(bid, key, id))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, meta.ErrNoSuchVersion
	}
	man, err := manifestOf(tx, bid, key, id, v)
	if err != nil {
		return nil, err
	}
	return decodeRow(v, man, key, &id)
}

// decodeRow decodes a stored row of key (and of id, if given) whose
// manifest, if kept apart, is man; nil if not.
func decodeRow(row, man []byte, key string, id *meta.VersionID) (*meta.Version, error) {
	if len(man) == 0 {
		return unmarshalRow(row, key, id)
	}
	v, err := unmarshalRow(meta.VersionAttrs(row), key, id)
	if err != nil {
		return nil, err
	}
	v.Manifest = bytes.Clone(man)
	return v, nil
}

// unmarshalRow decodes a stored row and checks that it is the row of key
// (and of id, if given) that the engine key it was stored under names.
func unmarshalRow(data []byte, key string, id *meta.VersionID) (*meta.Version, error) {
	v, err := meta.UnmarshalVersion(data)
	if err != nil {
		return nil, err
	}
	if v.Key != key || id != nil && v.ID != *id {
		return nil, fmt.Errorf("%w: row %q@%s stored under %q", meta.ErrCorrupt, v.Key, v.ID, key)
	}
	return v, nil
}

// Get returns the row (key, id).
func (s *Store) Get(ctx context.Context, b meta.Bucket, key string, id meta.VersionID) (*meta.Version, error) {
	var v *meta.Version
	err := s.e.View(ctx, func(tx Txn) (err error) {
		v, err = getRow(tx, b.ID, key, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s@%s: %w", b.Name, key, id, err)
	}
	return v, nil
}

// GetNull returns the null row of key.
func (s *Store) GetNull(ctx context.Context, b meta.Bucket, key string) (*meta.Version, error) {
	var v *meta.Version
	err := s.e.View(ctx, func(tx Txn) error {
		id, err := getID(tx, keyKey(spaceNull, b.ID, key))
		if err != nil {
			return err
		}
		if id == nil {
			return meta.ErrNoSuchVersion
		}
		v, err = getRow(tx, b.ID, key, *id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s@null: %w", b.Name, key, err)
	}
	return v, nil
}

// get reads the record at k and decodes it; missing if it is absent.
func get[T any](tx Txn, k []byte, missing error, decode func(k, v []byte) (T, error)) (T, error) {
	v, err := tx.Get(k)
	if err == nil && v == nil {
		err = missing
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return decode(k, v)
}

// collect decodes the records in [start, end) and returns, in order, up to
// limit (no limit if limit ≤ 0) of those keep accepts (all if keep is nil).
func collect[T any](tx Txn, start, end []byte, limit int, decode func(k, v []byte) (T, error), keep func(T) bool) ([]T, error) {
	var out []T
	var derr error
	err := tx.Scan(start, end, func(k, v []byte) bool {
		r, err := decode(k, v)
		if err != nil {
			derr = err
			return false
		}
		if keep == nil || keep(r) {
			out = append(out, r)
		}
		return limit <= 0 || len(out) < limit
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// insert sets k to v unless k exists, in which case it fails with exists:
// the compare-and-set of every create.
func insert(tx Txn, k, v []byte, exists error) error {
	old, err := tx.Get(k)
	if err != nil {
		return err
	}
	if old != nil {
		return exists
	}
	return tx.Set(k, v)
}

// deleteExisting removes k, failing with missing if it is absent.
func deleteExisting(tx Txn, k []byte, missing error) error {
	old, err := tx.Get(k)
	if err == nil && old == nil {
		err = missing
	}
	if err != nil {
		return err
	}
	return tx.Delete(k)
}

// deleteRange removes every key in [start, end). Keys are gathered first:
// a Scan callback must not write.
func deleteRange(tx Txn, start, end []byte) error {
	var ks [][]byte
	if err := tx.Scan(start, end, func(k, _ []byte) bool {
		ks = append(ks, bytes.Clone(k))
		return true
	}); err != nil {
		return err
	}
	for _, k := range ks {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the engine.
func (s *Store) Close() error { return s.e.Close() }
