package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// MinPartSize is the smallest a part other than the last may be (S3's 5 MiB).
const MinPartSize = 5 << 20

// UploadOptions describe a CreateUpload.
type UploadOptions struct {
	// Attrs are the attributes the completed version will carry.
	Attrs
	// FullObjectChecksum is meta.Upload's: the completed version's
	// checksum (of the algorithm Attrs.Checksums names) covers its bytes.
	FullObjectChecksum bool
}

// CreateUpload starts a multipart upload of key.
func (s *Service) CreateUpload(ctx context.Context, bucket, key string, o UploadOptions) (*meta.Upload, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	now := s.now()
	tmpl := &meta.Version{Key: key}
	o.Apply(tmpl)
	u := &meta.Upload{Key: key, ID: meta.NewUploadID(now), Initiated: now, Template: tmpl, FullObjectChecksum: o.FullObjectChecksum}
	if err := s.meta.CreateUpload(ctx, b, u); err != nil {
		return nil, err
	}
	return u, nil
}

// PartOptions describe an UploadPart.
type PartOptions struct {
	Size int64  // declared length; negative means unknown
	MD5  []byte // Content-MD5, verified when set
	// Finish, as in PutOptions, completes or refuses the part once its
	// bytes are stored (trailing checksums).
	Finish func(p *meta.Part) error
}

// UploadPart streams r into chunks and records it as part number of the
// upload, replacing an earlier part of that number.
func (s *Service) UploadPart(ctx context.Context, bucket, key, uploadID string, number int32, r io.Reader, o PartOptions) (*meta.Part, error) {
	p, err := s.uploadPart(ctx, bucket, key, uploadID, number, r, o)
	if err != nil {
		return nil, fmt.Errorf("upload part %d of %s/%s: %w", number, bucket, key, err)
	}
	return p, nil
}

func (s *Service) uploadPart(ctx context.Context, bucket, key, uploadID string, number int32, r io.Reader, o PartOptions) (*meta.Part, error) {
	b, u, err := s.openUpload(ctx, bucket, key, uploadID)
	if err != nil {
		return nil, err
	}
	if u.State != meta.Uploading {
		return nil, meta.ErrNoSuchUpload
	}
	// Parts are never inline: the completed manifest joins their chunks.
	w, err := data.Write(ctx, s.data, r, data.WriteOptions{ChunkSize: s.opts.ChunkSize, InlineMax: -1})
	if err != nil {
		return nil, err
	}
	p, err := s.recordPart(ctx, b, u, number, w, o)
	if err != nil {
		s.discard(w.Manifest)
		return nil, err
	}
	return p, nil
}

func (s *Service) recordPart(ctx context.Context, b meta.Bucket, u *meta.Upload, number int32, w *data.WriteResult, o PartOptions) (*meta.Part, error) {
	if o.Size >= 0 && w.Size != o.Size {
		return nil, fmt.Errorf("got %d bytes, declared %d: %w", w.Size, o.Size, meta.ErrIncompleteBody)
	}
	if o.MD5 != nil && string(o.MD5) != string(w.Sum) {
		return nil, meta.ErrBadDigest
	}
	p := &meta.Part{Number: number, Size: w.Size, ETag: hex.EncodeToString(w.Sum), Modified: s.now()}
	if o.Finish != nil {
		if err := o.Finish(p); err != nil {
			return nil, err
		}
	}
	return p, s.putPart(ctx, b, u, p, w.Manifest)
}

func (s *Service) putPart(ctx context.Context, b meta.Bucket, u *meta.Upload, p *meta.Part, m *data.Manifest) error {
	man, err := data.EncodeManifest(m)
	if err != nil {
		return err
	}
	p.Manifest = man
	refs := func() ([]data.ChunkID, error) { return m.ChunkIDs(), nil }
	return s.guarded(ctx, refs, func() error { return s.meta.PutPart(ctx, b, u.Key, u.ID, p) })
}

// CopyPart records bytes [off, off+n) of a source version (n < 0: all of
// it) as part number, sharing the source's chunks: no bytes are copied.
// The part's ETag is derived from the source's ETag and the range, not an
// MD5 of the bytes, which would mean reading them all.
func (s *Service) CopyPart(ctx context.Context, bucket, key, uploadID string, number int32, src CopySource) (*meta.Part, *meta.Version, error) {
	p, v, err := s.copyPart(ctx, bucket, key, uploadID, number, src)
	if err != nil {
		return nil, nil, fmt.Errorf("copy part %d of %s/%s from %s/%s: %w", number, bucket, key, src.Bucket, src.Key, err)
	}
	return p, v, nil
}

// CopySource names the bytes a CopyPart takes.
type CopySource struct {
	Bucket, Key, VersionID string
	Offset, Length         int64 // Length < 0: to the end
	Check                  func(src *meta.Version) error
}

func (s *Service) copyPart(ctx context.Context, bucket, key, uploadID string, number int32, src CopySource) (*meta.Part, *meta.Version, error) {
	b, u, err := s.openUpload(ctx, bucket, key, uploadID)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.Head(ctx, src.Bucket, src.Key, src.VersionID)
	if err != nil {
		return nil, nil, err
	}
	if src.Check != nil {
		if err := src.Check(v); err != nil {
			return nil, nil, err
		}
	}
	off, n := src.Offset, src.Length
	if n < 0 {
		n = v.Size - off
	}
	if off < 0 || n < 0 || off+n > v.Size {
		return nil, nil, fmt.Errorf("bytes %d+%d of %d: %w", off, n, v.Size, meta.ErrInvalidRange)
	}
	m, err := manifest(v)
	if err != nil {
		return nil, nil, err
	}
	m = m.Slice(off, n)
	if len(m.GetInline()) > 0 {
		// A small source lives in its row: give the part a chunk of its own.
		w, err := data.Write(ctx, s.data, bytes.NewReader(m.GetInline()), data.WriteOptions{InlineMax: -1})
		if err != nil {
			return nil, nil, err
		}
		m = w.Manifest
	}
	sum := md5.Sum(fmt.Appendf(nil, "%s:%d+%d", v.ETag, off, n))
	p := &meta.Part{Number: number, Size: n, ETag: hex.EncodeToString(sum[:]), Modified: s.now()}
	if err := s.putPart(ctx, b, u, p, m); err != nil {
		return nil, nil, err
	}
	return p, v, nil
}

// openUpload resolves an upload and its bucket.
func (s *Service) openUpload(ctx context.Context, bucket, key, uploadID string) (meta.Bucket, *meta.Upload, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return meta.Bucket{}, nil, err
	}
	u, err := s.meta.Upload(ctx, b, key, uploadID)
	if err != nil {
		return meta.Bucket{}, nil, err
	}
	return b, u, nil
}

// CompletedPart is one entry of a CompleteMultipartUpload request.
type CompletedPart struct {
	Number int32
	ETag   string // unquoted
}

// CompleteUpload joins the listed parts into one new version of the key:
// its manifest is the parts' chunks in order (nothing is copied) and its
// ETag the MD5 of the parts' MD5s with "-N". The upload enters Completing
// under compare-and-set first, so no part can change meanwhile and two
// Completes cannot both build a version; the row and the upload's end
// commit together. A repeated Complete of a completed upload returns the
// version it made. o may be nil.
func (s *Service) CompleteUpload(ctx context.Context, bucket, key, uploadID string, parts []CompletedPart, o *CompleteOptions) (*meta.Version, error) {
	if o == nil {
		o = &CompleteOptions{}
	}
	v, err := s.completeUpload(ctx, bucket, key, uploadID, parts, o)
	if err != nil {
		return nil, fmt.Errorf("complete upload %s of %s/%s: %w", uploadID, bucket, key, err)
	}
	return v, nil
}

// CompleteOptions describe a CompleteUpload.
type CompleteOptions struct {
	// Check vets the key's head as in PutOptions.
	Check func(head *meta.Version) error
	// Finish completes or refuses the version once its parts are chosen
	// (parts: the stored parts the request listed, in its order), before
	// anything commits: the S3 layer checks the parts' checksums and gives
	// the version its own. A refusal leaves the upload open.
	Finish func(u *meta.Upload, v *meta.Version, parts []*meta.Part) error
}

func (s *Service) completeUpload(ctx context.Context, bucket, key, uploadID string, parts []CompletedPart, o *CompleteOptions) (*meta.Version, error) {
	b, u, err := s.openUpload(ctx, bucket, key, uploadID)
	if err != nil {
		return nil, err
	}
	if u.State == meta.Completed {
		return s.meta.Get(ctx, b, key, u.Version)
	}
	if err := checkOrder(parts); err != nil {
		return nil, err
	}
	u, err = s.meta.UpdateUpload(ctx, b, key, uploadID, func(u *meta.Upload) error {
		switch u.State {
		case meta.Completed:
			return nil
		case meta.Uploading:
			u.State, u.Version = meta.Completing, meta.NewVersionID(s.now())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if u.State == meta.Completed {
		return s.meta.Get(ctx, b, key, u.Version)
	}
	v, err := s.assemble(ctx, b, u, parts, o.Finish)
	if err != nil {
		// Let the client fix its list and try again (best effort: a
		// Complete left Completing resumes with the same version id).
		_, _ = s.meta.UpdateUpload(ctx, b, key, uploadID, func(u *meta.Upload) error {
			if u.State == meta.Completing {
				u.State = meta.Uploading
			}
			return nil
		})
		return nil, err
	}
	m := meta.PutMutation(b, v)
	m.Check, m.CompleteUpload = o.Check, uploadID
	if err := s.apply(ctx, b, m); err != nil {
		// A concurrent Complete that finished first makes this commit
		// fail (the upload is no longer Completing, or the version id is
		// taken): answer as it did.
		if done, uerr := s.meta.Upload(ctx, b, key, uploadID); uerr == nil && done.State == meta.Completed {
			return s.meta.Get(ctx, b, key, done.Version)
		}
		return nil, err
	}
	return v, nil
}

// checkOrder enforces S3's rule that a Complete lists parts by strictly
// ascending number.
func checkOrder(parts []CompletedPart) error {
	if len(parts) == 0 {
		return fmt.Errorf("no parts: %w", meta.ErrInvalidPart)
	}
	for i, p := range parts {
		if p.Number < 1 || p.Number > meta.MaxParts {
			return fmt.Errorf("part number %d: %w", p.Number, meta.ErrInvalidPart)
		}
		if i > 0 && p.Number <= parts[i-1].Number {
			return meta.ErrInvalidPartOrder
		}
	}
	return nil
}

// assemble builds the completed version from the stored parts the request
// lists, and has finish (if set) complete it. The chunks of parts it
// leaves out are left to the collector, as in AbortUpload.
func (s *Service) assemble(ctx context.Context, b meta.Bucket, u *meta.Upload, want []CompletedPart, finish func(*meta.Upload, *meta.Version, []*meta.Part) error) (*meta.Version, error) {
	stored := map[int32]*meta.Part{}
	for after := int32(0); ; {
		page, err := s.meta.Parts(ctx, b, u.Key, u.ID, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, p := range page {
			stored[p.Number] = p
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Number
	}
	sums := md5.New()
	mans := make([]*data.Manifest, 0, len(want))
	chosen := make([]*meta.Part, 0, len(want))
	for i, w := range want {
		p, ok := stored[w.Number]
		if !ok || p.ETag != w.ETag {
			return nil, fmt.Errorf("part %d (ETag %q): %w", w.Number, w.ETag, meta.ErrInvalidPart)
		}
		if i < len(want)-1 && p.Size < MinPartSize {
			return nil, fmt.Errorf("part %d is %d bytes: %w", w.Number, p.Size, meta.ErrEntityTooSmall)
		}
		m, err := data.DecodeManifest(p.Manifest)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", w.Number, err)
		}
		raw, _ := hex.DecodeString(p.ETag)
		sums.Write(raw)
		mans = append(mans, m)
		chosen = append(chosen, p)
	}
	whole, err := data.Concat(mans...)
	if err != nil {
		return nil, err
	}
	man, err := data.EncodeManifest(whole)
	if err != nil {
		return nil, err
	}
	v := *u.Template
	v.Key, v.ID, v.Size, v.Manifest = u.Key, u.Version, whole.GetSize(), man
	v.ETag = fmt.Sprintf("%x-%d", sums.Sum(nil), len(want))
	if finish != nil {
		if err := finish(u, &v, chosen); err != nil {
			return nil, err
		}
	}
	return &v, nil
}

// AbortUpload removes an upload and its parts. Their chunks are left to
// the collector (package gc): a part made by CopyPart shares its chunks
// with the source version, so deleting them here would destroy that
// version's bytes.
func (s *Service) AbortUpload(ctx context.Context, bucket, key, uploadID string) error {
	b, u, err := s.openUpload(ctx, bucket, key, uploadID)
	if err == nil && u.State != meta.Uploading {
		err = meta.ErrNoSuchUpload
	}
	if err == nil {
		err = s.meta.DeleteUpload(ctx, b, key, uploadID)
	}
	if err != nil {
		return fmt.Errorf("abort upload %s of %s/%s: %w", uploadID, bucket, key, err)
	}
	return nil
}

// Upload returns an upload in progress (ListParts needs its attributes).
func (s *Service) Upload(ctx context.Context, bucket, key, uploadID string) (*meta.Upload, error) {
	_, u, err := s.openUpload(ctx, bucket, key, uploadID)
	if err == nil && u.State == meta.Completed {
		err = meta.ErrNoSuchUpload
	}
	return u, err
}

// Parts returns up to limit parts of an upload numbered above after.
func (s *Service) Parts(ctx context.Context, bucket, key, uploadID string, after int32, limit int) ([]*meta.Part, error) {
	b, _, err := s.openUpload(ctx, bucket, key, uploadID)
	if err != nil {
		return nil, err
	}
	return s.meta.Parts(ctx, b, key, uploadID, after, limit)
}

// ListUploads returns a page of the bucket's uploads in progress.
func (s *Service) ListUploads(ctx context.Context, bucket string, o meta.UploadListOptions) ([]*meta.Upload, error) {
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	o.Completed = false
	return s.meta.ListUploads(ctx, b, o)
}
