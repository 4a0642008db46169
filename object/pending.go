package object

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// This file lets a front end prepare writes now and commit them later,
// many in one meta-store commit, so that they share its fsync: the mount
// (package fs) answers a close, an unlink or a rename as soon as the
// write is prepared and commits what its files change in batches.

// A Pending is a write prepared by Prepare and not committed yet: its
// bytes are durable in the chunk store and its rows are built, their
// version ids issued. Nothing of it is visible until CommitPending. The
// chunks of a Pending that never commits are left to the collector: the
// preparer may already have handed them out to readers.
type Pending struct {
	bucket meta.Bucket
	ms     []meta.Mutation
}

// Keys returns the keys the write changes, in the order they change.
func (p *Pending) Keys() []string {
	keys := make([]string, len(p.ms))
	for i, m := range p.ms {
		keys[i] = m.Key
	}
	return keys
}

// Heads returns, for each key of Keys, the row the write puts at the
// head of the key: its new latest version, or a delete marker; nil where
// it puts none and only removes a row (the DELETE of an unversioned key,
// or of one version). The mount shows its writes from them until they
// commit.
func (p *Pending) Heads() []*meta.Version {
	heads := make([]*meta.Version, len(p.ms))
	for i, m := range p.ms {
		heads[i] = m.Put
	}
	return heads
}

// Amend gives the version p writes the attributes a instead, as if it
// had been prepared with them, and returns it: a change of attributes
// made before the write commits then joins it rather than making a
// version of its own. p must write exactly one version and not be
// committed yet; the version keeps its id.
func (p *Pending) Amend(a Attrs) (*meta.Version, error) {
	var put *meta.Mutation
	for i := range p.ms {
		if p.ms[i].Put == nil || p.ms[i].Put.DeleteMarker {
			continue
		}
		if put != nil {
			return nil, fmt.Errorf("amend a write of several versions: %w", meta.ErrInvalidArgument)
		}
		put = &p.ms[i]
	}
	if put == nil {
		return nil, fmt.Errorf("amend a write of no version: %w", meta.ErrInvalidArgument)
	}
	v := *put.Put
	a.Apply(&v)
	put.Put = &v
	return &v, nil
}

// Prepare runs write, which calls write operations (Put, Edit, Delete,
// UpdateAttrs, RenameVersion, …) on d, a view of s whose commits are held
// back: everything else those operations do happens now, and the rows
// they would commit are kept in the Pending returned. Reads through d see
// the store as it is, without the writes held back. Version ids are
// issued as the rows are built, so the versions of a key keep the order
// in which their writes were prepared, whenever they commit. The versions
// the operations return are the ones CommitPending will write.
func (s *Service) Prepare(ctx context.Context, write func(d *Service) error) (*Pending, error) {
	r := &recorder{Store: s.meta}
	d := &Service{meta: r, data: s.data, opts: s.opts, buckets: s.buckets}
	if err := write(d); err != nil {
		return nil, err
	}
	return &Pending{bucket: r.bucket, ms: r.ms}, nil
}

// CommitPending commits prepared writes to one bucket in one meta-store
// commit: all of them or none. The writes must not depend on each other:
// backends without multi-key transactions run every check before
// applying any mutation, so a write whose check relies on another's row
// (a rename of a file whose creation is pending, say) must be committed
// after it, not with it. Watchers hear of the changes once committed.
func (s *Service) CommitPending(ctx context.Context, ps ...*Pending) error {
	var b meta.Bucket
	var ms []meta.Mutation
	for _, p := range ps {
		if len(p.ms) == 0 {
			continue
		}
		if len(ms) > 0 && p.bucket.ID != b.ID {
			return fmt.Errorf("commit writes to buckets %s and %s together: %w", b.Name, p.bucket.Name, meta.ErrInvalidArgument)
		}
		b = p.bucket
		ms = append(ms, p.ms...)
	}
	if len(ms) == 0 {
		return nil
	}
	return s.apply(ctx, b, ms...)
}

// recorder is a meta store whose commits are recorded, not applied.
type recorder struct {
	meta.Store
	bucket meta.Bucket
	ms     []meta.Mutation
}

func (r *recorder) Commit(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	if len(r.ms) > 0 && b.ID != r.bucket.ID {
		return fmt.Errorf("one write to buckets %s and %s: %w", r.bucket.Name, b.Name, meta.ErrInvalidArgument)
	}
	r.bucket = b
	r.ms = append(r.ms, ms...)
	return nil
}

// RenameVersion is Rename of head, the latest version of its key as the
// caller knows it, which may be a write the caller has prepared and not
// committed yet: a new version of dst sharing head's chunks and the
// DELETE of head's key, in one commit, which fails with meta.ErrConflict
// unless head is still the latest by then.
func (s *Service) RenameVersion(ctx context.Context, bucket string, head *meta.Version, dst, owner string) (*meta.Version, error) {
	if head.Key == dst {
		return nil, fmt.Errorf("rename %s/%s to itself: %w", bucket, dst, meta.ErrInvalidArgument)
	}
	b, err := s.target(ctx, bucket, dst)
	if err != nil {
		return nil, err
	}
	v := share(head, dst, CopyOptions{Owner: owner})
	del, _ := meta.DeleteMutation(b, head.Key, owner, s.now())
	del.Check = unchanged(head)
	if err := s.commit(ctx, b, v, nil, del); err != nil {
		return nil, fmt.Errorf("rename %s/%s to %s: %w", bucket, head.Key, dst, err)
	}
	return v, nil
}

// ReplaceAttrs writes a metadata-only new version of head's key, sharing
// head's bytes, with attributes a. Like RenameVersion it takes head as
// the caller knows it, and fails with meta.ErrConflict unless head is
// still the latest when it commits. UpdateAttrs is the form that reads
// the latest version itself and retries.
func (s *Service) ReplaceAttrs(ctx context.Context, bucket string, head *meta.Version, a Attrs) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, head.Key)
	if err != nil {
		return nil, err
	}
	v := share(head, head.Key, CopyOptions{Replace: &a})
	if err := s.commit(ctx, b, v, unchanged(head)); err != nil {
		return nil, fmt.Errorf("update attributes of %s/%s: %w", bucket, head.Key, err)
	}
	return v, nil
}
