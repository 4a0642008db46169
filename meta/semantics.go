package meta

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file is the semantics table of DESIGN.md, once: which rows a PUT or
// a DELETE writes and removes in each versioning state. Package object and
// the contract suite both build their mutations here.

// PutMutation turns v, a fully built row for a new PUT into b, into the
// mutation the table prescribes: in an Enabled bucket a new row at the
// head and nothing else touched; otherwise a null row that replaces the
// key's previous null row. It sets v.Null; v.ID must already be issued.
func PutMutation(b Bucket, v *Version) Mutation {
	v.Null = b.Versioning != Enabled
	return Mutation{Key: v.Key, Put: v, DropNull: v.Null}
}

// DeleteMutation is a DELETE of key without a version id: a delete marker
// at the head in an Enabled bucket; a null delete marker replacing the null
// row in a Suspended one; in an Unversioned bucket only the removal of the
// null row. The marker written, if any, is returned.
func DeleteMutation(b Bucket, key, owner string, now time.Time) (Mutation, *Version) {
	switch b.Versioning {
	case Unversioned:
		return Mutation{Key: key, DropNull: true}, nil
	default:
		m := &Version{Key: key, ID: NewVersionID(now), DeleteMarker: true, Owner: owner}
		return PutMutation(b, m), m
	}
}

// Latest returns the key's first row (it may be a delete marker), or
// ErrNoSuchKey when the key has no rows.
func Latest(ctx context.Context, s Store, b Bucket, key string) (*Version, error) {
	it := s.Scan(ctx, b, ScanOptions{Prefix: key})
	defer it.Close()
	if it.Next() {
		if v := it.Version(); v.Key == key {
			return v, nil
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("latest %s/%s: %w", b.Name, key, err)
	}
	return nil, fmt.Errorf("%s/%s: %w", b.Name, key, ErrNoSuchKey)
}

// Lookup returns the row named by a wire version id: "null" or 32 hex
// characters. A malformed id is ErrInvalidVersionID; a missing row
// ErrNoSuchVersion.
func Lookup(ctx context.Context, s Store, b Bucket, key, wireID string) (*Version, error) {
	if wireID == NullVersion {
		return s.GetNull(ctx, b, key)
	}
	id, err := ParseVersionID(wireID)
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, b, key, id)
}

// IsNotFound reports whether err means the key or version does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchVersion)
}
