package meta

import (
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
