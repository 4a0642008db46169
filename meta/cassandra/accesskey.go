package cassandra

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

var accessKeysPartition = partition{table: tableAccessKeys}

// CreateAccessKey inserts k unless its id is taken.
func (s *Store) CreateAccessKey(ctx context.Context, k meta.AccessKey) error {
	data, err := meta.MarshalAccessKey(k)
	if err == nil {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		err = s.wrap(ctx, s.lwt(ctx, accessKeysPartition, func(unsure bool) (bool, error) {
			r := record{s.q.createAccessKey, s.q.accessKey, []any{s.ns, k.ID}}
			return true, s.create(ctx, r, data, unsure, meta.ErrAccessKeyExists)
		}))
	}
	if err != nil {
		return fmt.Errorf("create access key %s: %w", k.ID, err)
	}
	return nil
}

// AccessKey returns the key with this id.
func (s *Store) AccessKey(ctx context.Context, id string) (meta.AccessKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	data, err := s.get(ctx, s.q.accessKey, s.ns, id)
	var k meta.AccessKey
	switch {
	case err != nil:
		err = s.wrap(ctx, err)
	case data == nil:
		err = meta.ErrNoSuchAccessKey
	default:
		k, err = unmarshalAccessKey(data, id)
	}
	if err != nil {
		return meta.AccessKey{}, fmt.Errorf("access key %s: %w", id, err)
	}
	return k, nil
}

// unmarshalAccessKey decodes an access key record and checks it against
// its id.
func unmarshalAccessKey(data []byte, id string) (meta.AccessKey, error) {
	k, err := meta.UnmarshalAccessKey(data)
	if err == nil && k.ID != id {
		err = fmt.Errorf("%w: access key %q stored under %q", meta.ErrCorrupt, k.ID, id)
	}
	return k, err
}

// ListAccessKeys returns every key, ordered by id: the clustering order
// of the namespace's partition.
func (s *Store) ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ks, err := readAll(ctx, s, meta.UnmarshalAccessKey, s.q.accessKeys, s.ns)
	if err != nil {
		return nil, fmt.Errorf("access keys: %w", s.wrap(ctx, err))
	}
	return ks, nil
}

// DeleteAccessKey removes the key with this id.
func (s *Store) DeleteAccessKey(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := s.lwt(ctx, accessKeysPartition, func(unsure bool) (bool, error) {
		applied, err := s.session.Query(s.q.deleteAccessKey, s.ns, id).MapScanCASContext(ctx, map[string]any{})
		switch {
		case err != nil:
			return false, err
		case !applied && !unsure: // after an unknown outcome, gone is gone
			return false, meta.ErrNoSuchAccessKey
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("delete access key %s: %w", id, s.wrap(ctx, err))
	}
	return nil
}
