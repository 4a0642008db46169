package meta

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxKeyLen is S3's limit on a key's length in bytes.
const MaxKeyLen = 1024

// A Version is one immutable row of a key's history: an object's bytes and
// metadata as one PUT left them, or a delete marker (tombstone). Rows are
// written once and never updated; whether a row is the latest is derived
// from its position (the first row of its key), never stored.
type Version struct {
	Key          string
	ID           VersionID
	Null         bool // the S3 "null" version of unversioned and suspended buckets
	DeleteMarker bool

	Size         int64
	ETag         string // unquoted: hex MD5, or "hex-N" for multipart
	Content      Content
	UserMeta     map[string]string // x-amz-meta-* with the prefix removed, names lowercased
	POSIX        *POSIX            // nil when the object carries no POSIX attributes
	StorageClass string            // "" means STANDARD
	Checksums    map[string]string // algorithm ("CRC32", "SHA256", ...) → base64 value
	Owner        string            // access key id of the writer; "" for the root

	// Manifest is the encoded chunk list (package data). It is opaque here:
	// meta stores and returns it and never looks inside.
	Manifest []byte
	// NoManifest marks a row listed for its attributes only
	// (ListOptions.Attrs): Manifest is nil whatever the row holds, so
	// the row's bytes cannot be reached from it, nor shared by a new
	// version. Read the row again by its id for that.
	NoManifest bool
	// ManifestOf, on a row being written (Mutation.Put) only, says that
	// its manifest is the one of the row it names, which the commit reads
	// in its own transaction: a version sharing another's bytes (a rename,
	// a change of attributes) then never carries them through the caller,
	// which may know the other row by its attributes only. NoManifest is
	// set and Manifest empty. Never stored: a row read back has its
	// manifest and no ManifestOf.
	ManifestOf *RowRef
}

// A RowRef names one row of a bucket.
type RowRef struct {
	Key string
	ID  VersionID
}

// Sharing returns a copy of v, a row being written whose ManifestOf
// names origin, with origin's manifest: what a backend writes once it has
// read origin in the commit's transaction (nil when that row does not
// exist). A row gone since the caller saw it is ErrConflict, as a failed
// Check is: the write was prepared against a state that no longer holds.
func (v *Version) Sharing(origin *Version) (*Version, error) {
	ref := v.ManifestOf
	switch {
	case origin == nil:
		return nil, fmt.Errorf("row %q@%s whose bytes %q shares is gone: %w", ref.Key, ref.ID, v.Key, ErrConflict)
	case origin.DeleteMarker:
		return nil, fmt.Errorf("row %q@%s whose bytes %q shares is a delete marker: %w", ref.Key, ref.ID, v.Key, ErrInvalidArgument)
	case origin.NoManifest:
		return nil, fmt.Errorf("row %q@%s whose bytes %q shares was read without them: %w", ref.Key, ref.ID, v.Key, ErrInvalidArgument)
	}
	c := *v
	c.Manifest, c.NoManifest, c.ManifestOf = origin.Manifest, false, nil
	return &c, nil
}

// DropManifest makes v a row of attributes only (NoManifest): what a
// scan with ScanOptions.Attrs yields, whatever part of the manifest the
// backend read.
func (v *Version) DropManifest() { v.Manifest, v.NoManifest = nil, true }

// Content holds the standard content headers S3 stores with an object.
type Content struct {
	Type         string
	Encoding     string
	Disposition  string
	Language     string
	CacheControl string
	Expires      string
}

// POSIX holds the attributes a mount gives a file. Mode includes the file
// type bits (regular, directory, symlink) as in syscall.Stat_t.
type POSIX struct {
	Mode    uint32
	UID     uint32
	GID     uint32
	Mtime   time.Time
	Symlink string // the target, for a symlink
}

// LastModified is the instant the version was written, taken from its id.
func (v *Version) LastModified() time.Time { return v.ID.Time() }

// WireID is the version id as S3 shows it: "null" for the null version.
func (v *Version) WireID() string {
	if v.Null {
		return NullVersion
	}
	return v.ID.String()
}

// ValidKey applies S3's key rules: 1 to 1024 bytes of valid UTF-8.
func ValidKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty key: %w", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes exceeds %d: %w", len(key), MaxKeyLen, ErrInvalidKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("key %q is not valid UTF-8: %w", key, ErrInvalidKey)
	}
	return nil
}
