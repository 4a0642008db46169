package meta

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Versioning is a bucket's versioning state. A bucket starts Unversioned,
// may move to Enabled, and then only between Enabled and Suspended: S3
// never lets a bucket go back to Unversioned.
type Versioning uint8

const (
	Unversioned Versioning = iota
	Enabled
	Suspended
)

func (v Versioning) String() string {
	switch v {
	case Unversioned:
		return "unversioned"
	case Enabled:
		return "enabled"
	case Suspended:
		return "suspended"
	}
	return fmt.Sprintf("versioning(%d)", uint8(v))
}

// ParseVersioning accepts the CLI and S3 spellings of a state.
func ParseVersioning(s string) (Versioning, error) {
	switch strings.ToLower(s) {
	case "enabled":
		return Enabled, nil
	case "suspended":
		return Suspended, nil
	case "unversioned", "":
		return Unversioned, nil
	}
	return 0, fmt.Errorf("versioning %q: %w", s, ErrInvalidVersioning)
}

// CanChange reports whether a bucket in state from may be set to to.
func (v Versioning) CanChange(to Versioning) bool {
	return to != Unversioned || v == Unversioned
}

// DefaultShards is the shard count of a bucket's rows on backends that
// partition them (Cassandra); it is fixed when the bucket is created.
const DefaultShards = 64

// A Bucket is a namespace of keys. ID never changes and never repeats, so a
// bucket deleted and created again under the same name starts empty even if
// stale rows of the old one linger in a backend.
type Bucket struct {
	Name       string
	ID         uint64
	Created    time.Time
	Versioning Versioning
	Owner      string // access key id of the owner; "" for the root
	Shards     uint32 // a power of two; backends that do not shard ignore it
	// Lifecycle holds the bucket's retention rules, applied by the
	// collector; nil when it has none.
	Lifecycle []LifecycleRule
}

// NewBucket returns a bucket record with a fresh random id, ready for
// Store.CreateBucket.
func NewBucket(name, owner string, now time.Time) (Bucket, error) {
	if err := ValidBucketName(name); err != nil {
		return Bucket{}, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Bucket{}, fmt.Errorf("bucket id: %w", err)
	}
	return Bucket{
		Name:    name,
		ID:      binary.BigEndian.Uint64(b[:]),
		Created: now.UTC(),
		Owner:   owner,
		Shards:  DefaultShards,
	}, nil
}

// ValidBucketName applies S3's general-purpose bucket naming rules: 3-63
// characters of lowercase letters, digits, '.' and '-', starting and ending
// with a letter or digit, no "..", not an IP address, none of the reserved
// prefixes and suffixes.
func ValidBucketName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("bucket name %q: %s: %w", name, why, ErrInvalidBucketName)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("must be 3 to 63 characters long")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return bad("only lowercase letters, digits, '.' and '-' are allowed")
		}
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return bad("must begin and end with a letter or digit")
	}
	if strings.Contains(name, "..") {
		return bad("must not contain \"..\"")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return bad("must not be an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return bad("reserved prefix " + p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return bad("reserved suffix " + s)
		}
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
