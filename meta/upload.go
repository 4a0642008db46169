package meta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// MaxParts is S3's limit on a multipart upload's parts (numbered 1..MaxParts).
const MaxParts = 10000

// UploadState is where a multipart upload stands. Completing is entered
// under compare-and-set, so two Completes cannot both build a version.
type UploadState uint8

const (
	Uploading UploadState = iota
	Completing
	// Completed uploads keep their record (without parts) so that a
	// repeated Complete answers with the same version; the collector
	// removes them after a while. Listings do not show them.
	Completed
)

func (s UploadState) String() string {
	switch s {
	case Uploading:
		return "uploading"
	case Completing:
		return "completing"
	case Completed:
		return "completed"
	}
	return fmt.Sprintf("upload-state(%d)", uint8(s))
}

// An Upload is a multipart upload in progress.
type Upload struct {
	Key       string
	ID        string // 32 hex characters: initiation time, then random bytes
	Initiated time.Time
	State     UploadState
	// Template carries the attributes the completed version gets
	// (content headers, user metadata, storage class, owner); Key is set,
	// ID, size, ETag and manifest are filled in by Complete.
	Template *Version
	// Version is the id the completed version gets, fixed when the upload
	// enters Completing so that a Complete retried after a crash writes
	// the same row, not a second one.
	Version VersionID
	// ETag of the completed object ("md5-of-part-md5s-N"), set with Version.
	ETag string
	// FullObjectChecksum says the completed object's checksum, of the
	// algorithm the template's Checksums name, covers its bytes (S3's
	// FULL_OBJECT type: the parts' CRCs combined) rather than being the
	// checksum of the parts' checksums (COMPOSITE, the default).
	FullObjectChecksum bool
}

// A Part is one uploaded part of an Upload. Uploading a part number again
// replaces it.
type Part struct {
	Number    int32
	Size      int64
	ETag      string // hex MD5 of the part's bytes
	Modified  time.Time
	Checksums map[string]string
	Manifest  []byte
}

// NewUploadID returns a fresh upload id whose string order follows
// initiation time, as ListMultipartUploads orders a key's uploads.
func NewUploadID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixNano()))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(fmt.Sprintf("meta: reading random bytes: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// ValidUploadID reports whether id has the form NewUploadID issues, so a
// malformed id from a client is refused before it reaches a backend.
func ValidUploadID(id string) error {
	if len(id) != 32 {
		return fmt.Errorf("upload id %q: %w", id, ErrNoSuchUpload)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return fmt.Errorf("upload id %q: %w", id, ErrNoSuchUpload)
	}
	return nil
}

// An AccessKey is an S3 credential. Each key is a distinct owner: the
// buckets it creates are its own.
type AccessKey struct {
	ID      string
	Secret  string
	Name    string // DisplayName in listings
	Created time.Time
	Root    bool // the root key may use every bucket
}

// Uploads is the part of the meta contract (embedded in Store) that keeps
// multipart uploads and their parts. Limits of 0 or less mean no limit.
type Uploads interface {
	// CreateUpload records a new upload in state Uploading.
	CreateUpload(ctx context.Context, b Bucket, u *Upload) error
	// Upload returns the upload (key, id) or ErrNoSuchUpload.
	Upload(ctx context.Context, b Bucket, key, id string) (*Upload, error)
	// UpdateUpload applies fn to the upload atomically (compare-and-set)
	// and returns the result. fn may run more than once and must have no
	// side effects; it must not change Key or ID.
	UpdateUpload(ctx context.Context, b Bucket, key, id string, fn func(*Upload) error) (*Upload, error)
	// DeleteUpload removes an upload and every part of it (abort, or the
	// collector dropping a completed record); ErrNoSuchUpload if absent.
	DeleteUpload(ctx context.Context, b Bucket, key, id string) error
	// ListUploads returns up to o.Limit uploads in (key, id) order.
	ListUploads(ctx context.Context, b Bucket, o UploadListOptions) ([]*Upload, error)
	// PutPart stores p, replacing a part of the same number, provided the
	// upload is still Uploading — checked in the same transaction, so a
	// part can never slip in after Complete chose the parts
	// (ErrNoSuchUpload otherwise).
	PutPart(ctx context.Context, b Bucket, key, id string, p *Part) error
	// Parts returns up to limit parts numbered above after, in order;
	// ErrNoSuchUpload when the upload does not exist.
	Parts(ctx context.Context, b Bucket, key, id string, after int32, limit int) ([]*Part, error)
}

// UploadListOptions select a page of uploads.
type UploadListOptions struct {
	Prefix string
	// AfterKey and AfterID start the page after that upload; AfterID ""
	// starts after every upload of AfterKey.
	AfterKey, AfterID string
	Limit             int
	// Completed includes uploads in state Completed (for the collector);
	// S3 listings leave them out.
	Completed bool
}

// AccessKeys is the part of the meta contract (embedded in Store) that
// keeps S3 credentials.
type AccessKeys interface {
	// CreateAccessKey inserts k if its id is free (compare-and-set),
	// else ErrAccessKeyExists.
	CreateAccessKey(ctx context.Context, k AccessKey) error
	// AccessKey returns the key with this id or ErrNoSuchAccessKey.
	AccessKey(ctx context.Context, id string) (AccessKey, error)
	// ListAccessKeys returns every key, ordered by id.
	ListAccessKeys(ctx context.Context) ([]AccessKey, error)
	// DeleteAccessKey removes a key; ErrNoSuchAccessKey if absent.
	DeleteAccessKey(ctx context.Context, id string) error
}
