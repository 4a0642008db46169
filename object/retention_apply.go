package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// Data returns the chunk store, for admin tools (gc, fsck) that walk it.
func (s *Service) Data() data.Store { return s.data }

// Now returns the Service's clock: the instant retention is judged at.
func (s *Service) Now() time.Time { return s.now() }

// SetLifecycle replaces the bucket's lifecycle rules; nil or empty removes
// them (DeleteBucketLifecycle). A rule without an ID gets a random one, as
// S3 gives it, and the whole configuration must pass meta.ValidLifecycle.
func (s *Service) SetLifecycle(ctx context.Context, bucket string, rules []meta.LifecycleRule) (meta.Bucket, error) {
	if len(rules) == 0 {
		rules = nil
	}
	rules = append([]meta.LifecycleRule(nil), rules...)
	for i := range rules {
		if rules[i].ID == "" {
			rules[i].ID = randomString(keyIDAlphabet, 20)
		}
	}
	if err := meta.ValidLifecycle(rules); err != nil {
		return meta.Bucket{}, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	return s.updateBucket(ctx, bucket, func(b *meta.Bucket) error {
		b.Lifecycle = rules
		return nil
	})
}

// Removes reports whether applying e in a bucket in state v removes its
// row, so that the row's chunks may become garbage, rather than hiding it
// under a delete marker.
func (e Expiry) Removes(v meta.Versioning) bool {
	if e.Action == ExpireCurrent {
		return e.Version.Null && v != meta.Enabled
	}
	return true
}

// Expire applies expiries a Policy chose for rows of bucket b, in as few
// commits as it can: all of them in one, or, when one no longer holds,
// one at a time, skipping those that do not. It returns the expiries
// applied, in order; an error means the store failed, not that a row
// changed.
//
// Each expiry is checked at commit time against what it was judged on,
// so a write racing in is never undone: a current version is expired
// only while it is still current, a noncurrent one removed only while it
// is not current (deleting the newer rows by id would make it current
// again), a delete marker removed only while it is still its key's first
// row, and only if no expiry of an older row of its key was skipped.
// Expiries of one key must come in the order Policy gives them.
func (s *Service) Expire(ctx context.Context, b meta.Bucket, es []Expiry) ([]Expiry, error) {
	if len(es) == 0 {
		return nil, nil
	}
	ms := make([]meta.Mutation, len(es))
	for i, e := range es {
		ms[i] = s.expiryMutation(b, e)
	}
	err := s.apply(ctx, b, ms...)
	switch {
	case err == nil:
		return es, nil
	case !stale(err):
		return nil, fmt.Errorf("expire in %s: %w", b.Name, err)
	}
	var done []Expiry
	skipped := "" // a key with a skipped expiry keeps its delete marker
	for i, e := range es {
		key := e.Version.Key
		if e.Action == RemoveMarker && key == skipped {
			continue
		}
		err := s.apply(ctx, b, ms[i])
		switch {
		case err == nil:
			done = append(done, e)
		case stale(err):
			skipped = key
		default:
			return done, fmt.Errorf("expire %s/%s@%s: %w", b.Name, key, e.Version.WireID(), err)
		}
	}
	return done, nil
}

// stale reports an error of a commit whose expiry no longer holds.
func stale(err error) bool {
	return errors.Is(err, meta.ErrConflict) || errors.Is(err, meta.ErrNoSuchVersion)
}

// expiryMutation builds the commit of one expiry, with its check.
func (s *Service) expiryMutation(b meta.Bucket, e Expiry) meta.Mutation {
	v := e.Version
	switch e.Action {
	case ExpireCurrent:
		m, _ := meta.DeleteMutation(b, v.Key, "", s.now())
		m.Check = unchanged(v)
		return m
	case ExpireNoncurrent:
		return meta.Mutation{Key: v.Key, Delete: v.ID, Check: func(head *meta.Version) error {
			if head != nil && head.ID == v.ID {
				return fmt.Errorf("%s@%s is current again: %w", v.Key, v.WireID(), meta.ErrConflict)
			}
			return nil
		}}
	default: // RemoveMarker
		return meta.Mutation{Key: v.Key, Delete: v.ID, Check: unchanged(v)}
	}
}

// ExpireUpload removes an upload the collector is done with: incomplete
// and due under AbortIncompleteMultipartUpload, or a completed upload's
// record kept past the time a repeated Complete is expected. Unlike
// AbortUpload it deletes no chunk: parts made by UploadPartCopy share
// chunks with versions, so the collector's sweep reclaims whichever of
// them no row references.
func (s *Service) ExpireUpload(ctx context.Context, b meta.Bucket, u *meta.Upload) error {
	return s.meta.DeleteUpload(ctx, b, u.Key, u.ID)
}
