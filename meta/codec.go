package meta

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

// The stored form of buckets and version rows is protobuf (meta/metapb),
// shared by every backend that stores blobs: the ordered-KV family and
// Cassandra. Marshal refuses records that Unmarshal would reject, so what
// was written can always be read back; Unmarshal distrusts its input and
// reports anything malformed as ErrCorrupt.

// marshalOpts makes the encoding of a record a function of the record:
// maps are written in key order.
var marshalOpts = proto.MarshalOptions{Deterministic: true}

// MarshalBucket encodes b for storage.
func MarshalBucket(b Bucket) ([]byte, error) {
	if err := checkBucket(b.Name, uint32(b.Versioning)); err != nil {
		return nil, fmt.Errorf("marshal bucket %q: %w", b.Name, err)
	}
	created, err := unixNanos(b.Created)
	if err != nil {
		return nil, fmt.Errorf("marshal bucket %q: created: %w", b.Name, err)
	}
	data, err := marshalOpts.Marshal(&metapb.Bucket{
		Name:             b.Name,
		Id:               b.ID,
		CreatedUnixNanos: created,
		Versioning:       uint32(b.Versioning),
		Owner:            b.Owner,
		Shards:           b.Shards,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal bucket %q: %w: %w", b.Name, ErrInvalidArgument, err)
	}
	return data, nil
}

// UnmarshalBucket decodes and validates a stored bucket.
func UnmarshalBucket(data []byte) (Bucket, error) {
	var pb metapb.Bucket
	if err := proto.Unmarshal(data, &pb); err != nil {
		return Bucket{}, fmt.Errorf("%w: bucket: %v", ErrCorrupt, err)
	}
	if err := checkBucket(pb.Name, pb.Versioning); err != nil {
		return Bucket{}, fmt.Errorf("%w: bucket: %v", ErrCorrupt, err)
	}
	return Bucket{
		Name:       pb.Name,
		ID:         pb.Id,
		Created:    fromUnixNanos(pb.CreatedUnixNanos),
		Versioning: Versioning(pb.Versioning),
		Owner:      pb.Owner,
		Shards:     pb.Shards,
	}, nil
}

// checkBucket holds the rules both directions enforce. The name is only
// required to be non-empty: naming rules may tighten, and buckets created
// under the old ones must stay readable.
func checkBucket(name string, versioning uint32) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrInvalidBucketName)
	}
	if versioning > uint32(Suspended) {
		return fmt.Errorf("versioning state %d: %w", versioning, ErrInvalidArgument)
	}
	return nil
}

// MarshalVersion encodes the row v for storage.
func MarshalVersion(v *Version) ([]byte, error) {
	if v == nil {
		return nil, fmt.Errorf("marshal version: nil row: %w", ErrInvalidArgument)
	}
	if err := checkVersion(v); err != nil {
		return nil, fmt.Errorf("marshal version %s@%s: %w", v.Key, v.ID, err)
	}
	pb := &metapb.Version{
		Key:          v.Key,
		Id:           v.ID[:],
		Null:         v.Null,
		DeleteMarker: v.DeleteMarker,
		Size:         v.Size,
		Etag:         v.ETag,
		StorageClass: v.StorageClass,
		Checksums:    v.Checksums,
		Owner:        v.Owner,
		Manifest:     v.Manifest,
	}
	if v.Content != (Content{}) {
		c := v.Content
		pb.Content = &metapb.Content{
			Type:         []byte(c.Type),
			Encoding:     []byte(c.Encoding),
			Disposition:  []byte(c.Disposition),
			Language:     []byte(c.Language),
			CacheControl: []byte(c.CacheControl),
			Expires:      []byte(c.Expires),
		}
	}
	if len(v.UserMeta) > 0 {
		pb.UserMeta = make(map[string][]byte, len(v.UserMeta))
		for k, val := range v.UserMeta {
			pb.UserMeta[k] = []byte(val)
		}
	}
	if p := v.POSIX; p != nil {
		mtime, err := unixNanos(p.Mtime)
		if err != nil {
			return nil, fmt.Errorf("marshal version %s@%s: mtime: %w", v.Key, v.ID, err)
		}
		pb.Posix = &metapb.Posix{
			Mode:           p.Mode,
			Uid:            p.UID,
			Gid:            p.GID,
			MtimeUnixNanos: mtime,
			Symlink:        []byte(p.Symlink),
		}
	}
	data, err := marshalOpts.Marshal(pb)
	if err != nil {
		// Only string fields can fail: user metadata names or checksum
		// entries that are not UTF-8.
		return nil, fmt.Errorf("marshal version %s@%s: %w: %w", v.Key, v.ID, ErrInvalidArgument, err)
	}
	return data, nil
}

// UnmarshalVersion decodes and validates a stored row.
func UnmarshalVersion(data []byte) (*Version, error) {
	var pb metapb.Version
	if err := proto.Unmarshal(data, &pb); err != nil {
		return nil, fmt.Errorf("%w: version: %v", ErrCorrupt, err)
	}
	if len(pb.Id) != len(VersionID{}) {
		return nil, fmt.Errorf("%w: version of %q: id of %d bytes", ErrCorrupt, pb.Key, len(pb.Id))
	}
	v := &Version{
		Key:          pb.Key,
		ID:           VersionID(pb.Id),
		Null:         pb.Null,
		DeleteMarker: pb.DeleteMarker,
		Size:         pb.Size,
		ETag:         pb.Etag,
		StorageClass: pb.StorageClass,
		Checksums:    pb.Checksums,
		Owner:        pb.Owner,
	}
	if len(pb.Manifest) > 0 { // an explicitly empty field decodes as empty, not nil
		v.Manifest = pb.Manifest
	}
	if c := pb.Content; c != nil {
		v.Content = Content{
			Type:         string(c.Type),
			Encoding:     string(c.Encoding),
			Disposition:  string(c.Disposition),
			Language:     string(c.Language),
			CacheControl: string(c.CacheControl),
			Expires:      string(c.Expires),
		}
	}
	if len(pb.UserMeta) > 0 {
		v.UserMeta = make(map[string]string, len(pb.UserMeta))
		for k, val := range pb.UserMeta {
			v.UserMeta[k] = string(val)
		}
	}
	if p := pb.Posix; p != nil {
		v.POSIX = &POSIX{
			Mode:    p.Mode,
			UID:     p.Uid,
			GID:     p.Gid,
			Mtime:   fromUnixNanos(p.MtimeUnixNanos),
			Symlink: string(p.Symlink),
		}
	}
	if err := checkVersion(v); err != nil {
		return nil, fmt.Errorf("%w: version: %v", ErrCorrupt, err)
	}
	return v, nil
}

// checkVersion holds the rules both directions enforce.
func checkVersion(v *Version) error {
	if err := ValidKey(v.Key); err != nil {
		return err
	}
	if v.ID.IsZero() {
		return fmt.Errorf("zero id: %w", ErrInvalidVersionID)
	}
	if v.Size < 0 {
		return fmt.Errorf("negative size %d: %w", v.Size, ErrInvalidArgument)
	}
	return nil
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// unixNanos encodes t; the zero time is encoded as absent.
func unixNanos(t time.Time) (*int64, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, fmt.Errorf("%v is outside the years 1678-2262: %w", t, ErrInvalidArgument)
	}
	n := t.UnixNano()
	return &n, nil
}

// fromUnixNanos is the inverse of unixNanos, in UTC.
func fromUnixNanos(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(0, *n).UTC()
}
