// Package object is the one core of stratafs: every front end (the S3
// endpoint, the FUSE mount, the CLI) reads and writes versions only through
// it, so both paths show the same latest-version and tombstone semantics.
// It is the only code that writes version rows. Object bytes go to the
// chunk store first and are durable before the row that names them
// commits, so a crash can leave unreferenced chunks but never a row that
// points at nothing.
package object

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// Options tune a Service. The zero value is ready for production use.
type Options struct {
	// Now is the clock version ids are stamped with, and bucket records
	// are aged by; time.Now by default. Tests of retention and time travel
	// pass a controllable one.
	Now func() time.Time
	// ChunkSize and InlineMax are passed to data.Write (its defaults when 0).
	ChunkSize int
	InlineMax int
	// BucketTTL is how long a bucket record read from the meta store is
	// trusted (DefaultBucketTTL when 0; negative: never, every call reads
	// it). Changes made through this Service are seen at once; a change
	// made by another process sharing the meta store (a bucket's
	// versioning state or lifecycle set, the bucket deleted) is seen by
	// this one within BucketTTL.
	BucketTTL time.Duration
}

// Service is the core. It is safe for concurrent use.
type Service struct {
	meta     meta.Store
	data     data.Store
	opts     Options
	watchers watchers
	guards   guards
	buckets  *bucketCache // shared with the views Prepare makes
}

// New returns a Service over a meta store and a chunk store. It takes
// ownership of neither: the caller closes them.
func New(m meta.Store, d data.Store, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BucketTTL == 0 {
		o.BucketTTL = DefaultBucketTTL
	}
	return &Service{meta: m, data: d, opts: o, buckets: new(bucketCache)}
}

// Meta returns the meta store, for admin tools (gc, fsck) that walk it.
func (s *Service) Meta() meta.Store { return s.meta }

func (s *Service) now() time.Time { return s.opts.Now().UTC() }

// CreateBucket creates an unversioned bucket owned by owner and returns
// its record as the store keeps it.
func (s *Service) CreateBucket(ctx context.Context, name, owner string) (meta.Bucket, error) {
	b, err := meta.NewBucket(name, owner, s.now())
	if err != nil {
		return meta.Bucket{}, err
	}
	if err := s.meta.CreateBucket(ctx, b); err != nil {
		return meta.Bucket{}, fmt.Errorf("create bucket %s: %w", name, err)
	}
	// The store may fill fields of its own (Cassandra's shards=N replaces
	// Shards), and a commit with any other record fails: what is cached
	// and returned is the record read back, never b.
	s.forgetBucket(name)
	stored, err := s.bucket(ctx, name)
	if err != nil {
		return meta.Bucket{}, fmt.Errorf("create bucket %s: created, but reading it back: %w", name, err)
	}
	return stored, nil
}

// Bucket returns the named bucket or meta.ErrNoSuchBucket. It is cheap:
// the record comes from the Service's cache (see Options.BucketTTL).
func (s *Service) Bucket(ctx context.Context, name string) (meta.Bucket, error) {
	return s.bucket(ctx, name)
}

// Buckets returns every bucket, ordered by name.
func (s *Service) Buckets(ctx context.Context) ([]meta.Bucket, error) {
	return s.meta.Buckets(ctx)
}

// DeleteBucket removes an empty bucket: no versions, no delete markers.
func (s *Service) DeleteBucket(ctx context.Context, name string) error {
	err := s.meta.DeleteBucket(ctx, name)
	s.forgetBucket(name)
	return err
}

// SetVersioning moves a bucket to state v. A bucket that was ever
// versioned cannot become unversioned again (meta.ErrInvalidVersioning).
func (s *Service) SetVersioning(ctx context.Context, name string, v meta.Versioning) (meta.Bucket, error) {
	return s.updateBucket(ctx, name, func(b *meta.Bucket) error {
		if !b.Versioning.CanChange(v) {
			return fmt.Errorf("bucket %s: %s → %s: %w", name, b.Versioning, v, meta.ErrInvalidVersioning)
		}
		b.Versioning = v
		return nil
	})
}

// Attrs are the metadata a writer gives a new version.
type Attrs struct {
	Content      meta.Content
	UserMeta     map[string]string
	POSIX        *meta.POSIX
	StorageClass string
	Checksums    map[string]string
	Owner        string
}

// Apply gives v the attributes a.
func (a Attrs) Apply(v *meta.Version) {
	v.Content, v.UserMeta, v.POSIX = a.Content, a.UserMeta, a.POSIX
	v.StorageClass, v.Checksums, v.Owner = a.StorageClass, a.Checksums, a.Owner
}

// PutOptions describe a PUT.
type PutOptions struct {
	Attrs
	// Size is the declared body length; a body of another length fails
	// with meta.ErrIncompleteBody. Negative means unknown.
	Size int64
	// MD5, when set, must equal the body's MD5 (Content-MD5), else
	// meta.ErrBadDigest.
	MD5 []byte
	// Check runs atomically against the key's current head before the row
	// commits (conditional PUT); its error aborts the PUT.
	Check func(head *meta.Version) error
	// Finish, if set, runs once the whole body is stored and before the
	// row commits: it may complete the row from what only the end of the
	// body tells (trailing checksums) or refuse it with an error.
	Finish func(v *meta.Version) error
	// CRC32C hashes the body with CRC-32C instead of MD5 (data.CRC32C):
	// the version gets it as its one checksum (full-object CRC32C, which
	// S3 clients verify on GET) and an opaque ETag, as an edit does (see
	// Edit). The mount writes files so: with MD5, a single writer could
	// not pass MD5's speed on one core. MD5 must then be unset.
	CRC32C bool
}

// Put streams r into chunks and commits one new version of key: one meta
// store commit, whatever the bucket's versioning state (DESIGN.md's table
// says which rows it replaces). Nothing is visible until the commit.
func (s *Service) Put(ctx context.Context, bucket, key string, r io.Reader, o PutOptions) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	wo := data.WriteOptions{ChunkSize: s.opts.ChunkSize, InlineMax: s.opts.InlineMax}
	if o.CRC32C {
		if o.MD5 != nil {
			return nil, fmt.Errorf("put %s/%s: a Content-MD5 with a CRC32C body: %w", bucket, key, meta.ErrInvalidArgument)
		}
		wo.Digest = data.CRC32C
	}
	w, err := data.Write(ctx, s.data, r, wo)
	if err != nil {
		return nil, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	v, err := s.commitWritten(ctx, b, key, w, o)
	if err != nil {
		s.discard(w.Manifest)
		return nil, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return v, nil
}

// commitWritten checks the written body against what the writer declared
// and commits its row.
func (s *Service) commitWritten(ctx context.Context, b meta.Bucket, key string, w *data.WriteResult, o PutOptions) (*meta.Version, error) {
	if o.Size >= 0 && w.Size != o.Size {
		return nil, fmt.Errorf("got %d bytes, declared %d: %w", w.Size, o.Size, meta.ErrIncompleteBody)
	}
	if o.CRC32C {
		o.Checksums = map[string]string{"CRC32C": base64.StdEncoding.EncodeToString(w.Sum)}
		return s.putRow(ctx, b, key, w.Manifest, "", o)
	}
	if o.MD5 != nil && string(o.MD5) != string(w.Sum) {
		return nil, meta.ErrBadDigest
	}
	return s.putRow(ctx, b, key, w.Manifest, hex.EncodeToString(w.Sum), o)
}

// PutManifest commits a new version of key whose bytes are already
// durable in the chunk store, as m describes them. The mount uses it to
// commit an edited file that shares its untouched chunks with the previous
// version; etag is the version's ETag. o.Size and o.MD5 are not consulted.
func (s *Service) PutManifest(ctx context.Context, bucket, key string, m *data.Manifest, etag string, o PutOptions) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	v, err := s.putRow(ctx, b, key, m, etag, o)
	if err != nil {
		return nil, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return v, nil
}

// putRow commits the row of a new version of key with bytes m. An empty
// etag makes the version's ETag opaque: 128 bits of the SHA-256 of its
// encoded manifest in hex, followed by "-0". It changes whenever the bytes
// may have, and the '-' tells S3 clients, as for multipart uploads, not
// to take it for the body's MD5. A small file's manifest holds its bytes:
// SHA-256, which CPUs with SHA extensions run at twice MD5's speed, takes
// 2.4 µs of a mount's create of 4 KiB where MD5 took 5.3.
func (s *Service) putRow(ctx context.Context, b meta.Bucket, key string, m *data.Manifest, etag string, o PutOptions) (*meta.Version, error) {
	man, err := data.EncodeManifest(m)
	if err != nil {
		return nil, err
	}
	if etag == "" {
		sum := sha256.Sum256(man)
		etag = fmt.Sprintf("%x-0", sum[:16])
	}
	v := &meta.Version{Key: key, Size: m.GetSize(), ETag: etag, Manifest: man}
	o.Apply(v)
	if o.Finish != nil {
		if err := o.Finish(v); err != nil {
			return nil, err
		}
	}
	if err := s.commit(ctx, b, v, o.Check); err != nil {
		return nil, err
	}
	return v, nil
}

// commit stamps v with a fresh id and writes it per the semantics table,
// together with any further mutations, in one meta-store commit.
func (s *Service) commit(ctx context.Context, b meta.Bucket, v *meta.Version, check func(*meta.Version) error, also ...meta.Mutation) error {
	v.ID = meta.NewVersionID(s.now())
	m := meta.PutMutation(b, v)
	m.Check = check
	return s.apply(ctx, b, append([]meta.Mutation{m}, also...)...)
}

// apply is the one place the core commits: it shows the chunks the new
// rows reference to the collector's guard, writes the mutations and then
// tells the watchers which keys changed.
func (s *Service) apply(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	refs := func() ([]data.ChunkID, error) { return s.rowChunks(ctx, b, ms) }
	if err := s.guarded(ctx, refs, func() error { return s.meta.Commit(ctx, b, ms...) }); err != nil {
		if errors.Is(err, meta.ErrNoSuchBucket) {
			// Deleted, or deleted and created again, by another process
			// while this one trusted its record of it.
			s.forgetBucket(b.Name)
		}
		return err
	}
	s.notify(b.Name, ms)
	return nil
}

// discard deletes the chunks of a body whose row never committed. A
// failure here only leaves garbage for the collector.
func (s *Service) discard(m *data.Manifest) {
	for _, id := range m.ChunkIDs() {
		_ = s.data.Delete(context.Background(), id)
	}
}

// target resolves the bucket a write goes to and validates the key.
func (s *Service) target(ctx context.Context, bucket, key string) (meta.Bucket, error) {
	if err := meta.ValidKey(key); err != nil {
		return meta.Bucket{}, err
	}
	return s.bucket(ctx, bucket)
}

// Head returns the row a GET would serve. versionID "" means the latest.
// When the latest row is a delete marker the marker is returned with
// meta.ErrNoSuchKey; when versionID names a delete marker it is returned
// with meta.ErrDeleteMarker. Front ends show the marker's id either way.
func (s *Service) Head(ctx context.Context, bucket, key, versionID string) (*meta.Version, error) {
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if versionID == "" {
		v, err := meta.Latest(ctx, s.meta, b, key)
		switch {
		case err != nil:
			return nil, err
		case v.DeleteMarker:
			return v, fmt.Errorf("%s/%s: %w", bucket, key, meta.ErrNoSuchKey)
		}
		return v, nil
	}
	v, err := meta.Lookup(ctx, s.meta, b, key, versionID)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s/%s?versionId=%s: %w", bucket, key, versionID, err)
	case v.DeleteMarker:
		return v, fmt.Errorf("%s/%s?versionId=%s: %w", bucket, key, versionID, meta.ErrDeleteMarker)
	}
	return v, nil
}

// Whole returns v with its manifest: a version listed for its attributes
// only (meta.Version.NoManifest) is read again, by its exact id (a null
// row replaced since is not taken for it); any other is returned as it is.
func (s *Service) Whole(ctx context.Context, bucket string, v *meta.Version) (*meta.Version, error) {
	if !v.NoManifest {
		return v, nil
	}
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	w, err := s.meta.Get(ctx, b, v.Key, v.ID)
	if err != nil {
		return nil, fmt.Errorf("%s/%s?versionId=%s: %w", bucket, v.Key, v.WireID(), err)
	}
	return w, nil
}

// Object is a version opened for reading.
type Object struct {
	*meta.Version
	// Body streams the requested range; the caller closes it.
	Body io.ReadCloser
	// Offset and Length locate the range served within the version.
	Offset, Length int64
}

// Get opens a version for reading: the latest, or versionID. off and n
// select a byte range (n < 0: to the end); errors are as for Head, and
// meta.ErrInvalidRange for a range outside the object.
func (s *Service) Get(ctx context.Context, bucket, key, versionID string, off, n int64) (*Object, error) {
	v, err := s.Head(ctx, bucket, key, versionID)
	if err != nil {
		return nil, err
	}
	body, n, err := s.Open(ctx, v, off, n)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	return &Object{Version: v, Body: body, Offset: off, Length: n}, nil
}

// Open streams bytes [off, off+n) of version v (n < 0: to the end) and
// returns the length served. A handle that opened v keeps reading v
// whatever is written later: chunks never change, and the collector keeps
// v's chunks until the stream is closed (see Reading), even if v is
// removed meanwhile.
func (s *Service) Open(ctx context.Context, v *meta.Version, off, n int64) (io.ReadCloser, int64, error) {
	if n < 0 {
		n = v.Size - off
	}
	if off < 0 || n < 0 || off+n > v.Size {
		return nil, 0, fmt.Errorf("bytes %d+%d of %d: %w", off, n, v.Size, meta.ErrInvalidRange)
	}
	m, err := manifest(v)
	if err != nil {
		return nil, 0, fmt.Errorf("version %s: %w", v.WireID(), err)
	}
	h, err := s.hold(ctx, m)
	if err != nil {
		return nil, 0, fmt.Errorf("version %s: %w", v.WireID(), err)
	}
	body := data.NewReader(ctx, s.data, m, off, n)
	held := heldStream{&heldBody{ReadCloser: body, hold: h}, body}
	// A chunk store that cannot answer fails the open, before anything
	// is promised to the client (S3 answers 503, not a cut response).
	if err := body.Ready(); err != nil {
		held.Close()
		return nil, 0, fmt.Errorf("version %s: %w", v.WireID(), err)
	}
	return held, n, nil
}

// heldStream is a heldBody that keeps its stream's WriteTo, which io.Copy
// looks for: copied into an http.ResponseWriter, local chunk files go out
// with sendfile.
type heldStream struct {
	*heldBody
	s data.Stream
}

func (b heldStream) WriteTo(w io.Writer) (int64, error) { return b.s.WriteTo(w) }

// DeleteResult says what a DELETE did, as S3 reports it.
type DeleteResult struct {
	// VersionID is the marker written, or the version removed; "" when an
	// unversioned bucket's object was removed.
	VersionID string
	// DeleteMarker is set when a marker was written, or the version
	// removed was a marker.
	DeleteMarker bool
}

// DeleteOptions describe a DELETE.
type DeleteOptions struct {
	// VersionID, when set ("null" allowed), removes that row permanently.
	VersionID string
	// Owner is recorded on a delete marker.
	Owner string
}

// Delete without a version id hides the key per the semantics table (a
// delete marker, or removal of the null row); with one it removes that row
// permanently and the next row becomes the latest.
func (s *Service) Delete(ctx context.Context, bucket, key string, o DeleteOptions) (DeleteResult, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return DeleteResult{}, err
	}
	versionID := o.VersionID
	if versionID == "" {
		m, marker := meta.DeleteMutation(b, key, o.Owner, s.now())
		if err := s.apply(ctx, b, m); err != nil {
			return DeleteResult{}, fmt.Errorf("delete %s/%s: %w", bucket, key, err)
		}
		if marker == nil {
			return DeleteResult{}, nil
		}
		return DeleteResult{VersionID: marker.WireID(), DeleteMarker: true}, nil
	}
	v, err := meta.Lookup(ctx, s.meta, b, key, versionID)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete %s/%s?versionId=%s: %w", bucket, key, versionID, err)
	}
	if err := s.apply(ctx, b, meta.Mutation{Key: key, Delete: v.ID}); err != nil {
		return DeleteResult{}, fmt.Errorf("delete %s/%s?versionId=%s: %w", bucket, key, versionID, err)
	}
	return DeleteResult{VersionID: v.WireID(), DeleteMarker: v.DeleteMarker}, nil
}

// List returns a page of the bucket's live keys (ListObjects).
func (s *Service) List(ctx context.Context, bucket string, o meta.ListOptions) (*meta.ListResult, error) {
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return meta.List(ctx, s.meta, b, o)
}

// ListAsOf returns a page of the bucket as it was at instant at.
func (s *Service) ListAsOf(ctx context.Context, bucket string, at time.Time, o meta.ListOptions) (*meta.ListResult, error) {
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return meta.ListAsOf(ctx, s.meta, b, at, o)
}

// ListVersions returns a page of every row (ListObjectVersions).
func (s *Service) ListVersions(ctx context.Context, bucket string, o meta.VersionListOptions) (*meta.VersionListResult, error) {
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return meta.ListVersions(ctx, s.meta, b, o)
}
