package kv

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// CreateAccessKey inserts k unless its id is taken.
func (s *Store) CreateAccessKey(ctx context.Context, k meta.AccessKey) error {
	data, err := meta.MarshalAccessKey(k)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			return insert(tx, nameKey(spaceAccessKey, k.ID), data, meta.ErrAccessKeyExists)
		})
	}
	if err != nil {
		return fmt.Errorf("create access key %s: %w", k.ID, err)
	}
	return nil
}

// AccessKey returns the key with this id.
func (s *Store) AccessKey(ctx context.Context, id string) (meta.AccessKey, error) {
	var k meta.AccessKey
	err := s.e.View(ctx, func(tx Txn) (err error) {
		k, err = get(tx, nameKey(spaceAccessKey, id), meta.ErrNoSuchAccessKey, unmarshalAccessKey)
		return err
	})
	if err != nil {
		return meta.AccessKey{}, fmt.Errorf("access key %s: %w", id, err)
	}
	return k, nil
}

// ListAccessKeys returns every key, ordered by id.
func (s *Store) ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error) {
	var ks []meta.AccessKey
	start := []byte{spaceAccessKey}
	err := s.e.View(ctx, func(tx Txn) (err error) {
		ks, err = collect(tx, start, successor(start), 0, unmarshalAccessKey, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("access keys: %w", err)
	}
	return ks, nil
}

// DeleteAccessKey removes the key with this id.
func (s *Store) DeleteAccessKey(ctx context.Context, id string) error {
	err := s.e.Update(ctx, func(tx Txn) error {
		return deleteExisting(tx, nameKey(spaceAccessKey, id), meta.ErrNoSuchAccessKey)
	})
	if err != nil {
		return fmt.Errorf("delete access key %s: %w", id, err)
	}
	return nil
}

// unmarshalAccessKey decodes an access key record and checks it against
// its key.
func unmarshalAccessKey(k, v []byte) (meta.AccessKey, error) {
	id, err := decodeNameKey(k, spaceAccessKey)
	if err != nil {
		return meta.AccessKey{}, err
	}
	ak, err := meta.UnmarshalAccessKey(v)
	if err == nil && ak.ID != id {
		err = fmt.Errorf("%w: access key %q stored under %q", meta.ErrCorrupt, ak.ID, id)
	}
	return ak, err
}
