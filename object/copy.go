package object

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// CopyOptions describe a copy.
type CopyOptions struct {
	// SrcVersionID selects the source version; "" is the latest.
	SrcVersionID string
	// Replace, when set, gives the copy these attributes instead of the
	// source's (S3's metadata directive REPLACE; a chmod in the mount).
	Replace *Attrs
	// Owner is recorded on the copy when Replace is nil.
	Owner string
	// CheckSource vets the source row (copy-source conditionals). It runs
	// before anything is built or written, so a caller may also capture
	// the source there (S3's x-amz-copy-source-version-id) or fill in
	// Replace from it.
	CheckSource func(src *meta.Version) error
	// Check vets the destination's head atomically, as in PutOptions.
	Check func(head *meta.Version) error
}

// Copy writes a new version of dstKey that shares the source version's
// chunks: no bytes are copied, whatever the size. A delete-marker source
// fails as Head does.
func (s *Service) Copy(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, o CopyOptions) (*meta.Version, error) {
	v, err := s.copyRow(ctx, srcBucket, srcKey, dstBucket, dstKey, o)
	if err != nil {
		return nil, fmt.Errorf("copy %s/%s to %s/%s: %w", srcBucket, srcKey, dstBucket, dstKey, err)
	}
	return v, nil
}

func (s *Service) copyRow(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, o CopyOptions) (*meta.Version, error) {
	src, err := s.Head(ctx, srcBucket, srcKey, o.SrcVersionID)
	if err != nil {
		return nil, err
	}
	if o.CheckSource != nil {
		if err := o.CheckSource(src); err != nil {
			return nil, err
		}
	}
	b, err := s.target(ctx, dstBucket, dstKey)
	if err != nil {
		return nil, err
	}
	v := share(src, dstKey, o)
	if err := s.commit(ctx, b, v, o.Check); err != nil {
		return nil, err
	}
	return v, nil
}

// share builds a new row for key carrying src's bytes. A src known by its
// attributes only (NoManifest) is named instead: the store reads its
// manifest as the row commits (meta.Version.ManifestOf), so a rename or a
// chmod in the mount need not read a small file's bytes to move them.
func share(src *meta.Version, key string, o CopyOptions) *meta.Version {
	v := &meta.Version{
		Key:      key,
		Size:     src.Size,
		ETag:     src.ETag,
		Manifest: src.Manifest,
	}
	if src.NoManifest {
		v.NoManifest, v.ManifestOf = true, &meta.RowRef{Key: src.Key, ID: src.ID}
	}
	if o.Replace != nil {
		o.Replace.Apply(v)
		return v
	}
	Attrs{
		Content:      src.Content,
		UserMeta:     src.UserMeta,
		POSIX:        src.POSIX,
		StorageClass: src.StorageClass,
		Checksums:    src.Checksums,
		Owner:        o.Owner,
	}.Apply(v)
	return v
}

// whole refuses a version listed for its attributes only
// (meta.Version.NoManifest): its bytes can be neither read nor shared
// from it, and a version sharing them would have none.
func whole(v *meta.Version) error {
	if v.NoManifest {
		return fmt.Errorf("version %s of %q was listed without its manifest: %w", v.WireID(), v.Key, meta.ErrInvalidArgument)
	}
	return nil
}

// manifest decodes v's chunk list.
func manifest(v *meta.Version) (*data.Manifest, error) {
	if err := whole(v); err != nil {
		return nil, err
	}
	return data.DecodeManifest(v.Manifest)
}

// Rename moves the latest version of src to dst within a bucket without
// copying bytes: a new version of dst sharing src's chunks and the DELETE
// of src, in one commit (atomic on backends with multi-key transactions).
// dst's previous content becomes an old version (versioned bucket) or is
// replaced, exactly as a PUT would.
func (s *Service) Rename(ctx context.Context, bucket, src, dst, owner string) (*meta.Version, error) {
	v, err := s.rename(ctx, bucket, src, dst, owner)
	if err != nil {
		return nil, fmt.Errorf("rename %s/%s to %s: %w", bucket, src, dst, err)
	}
	return v, nil
}

func (s *Service) rename(ctx context.Context, bucket, src, dst, owner string) (*meta.Version, error) {
	if src == dst {
		return nil, fmt.Errorf("source and destination are the same key: %w", meta.ErrInvalidArgument)
	}
	b, err := s.target(ctx, bucket, dst)
	if err != nil {
		return nil, err
	}
	head, err := s.Head(ctx, bucket, src, "")
	if err != nil {
		return nil, err
	}
	v := share(head, dst, CopyOptions{Owner: owner})
	del, _ := meta.DeleteMutation(b, src, owner, s.now())
	// The source must still be the version we copied when we commit;
	// otherwise a write that raced in would be deleted unseen.
	del.Check = unchanged(head)
	if err := s.commit(ctx, b, v, nil, del); err != nil {
		return nil, err
	}
	return v, nil
}
