package meta

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

// The stored form of buckets, version rows, multipart uploads, their parts
// and access keys is protobuf (meta/metapb), shared by every backend that
// stores blobs: the ordered-KV family and Cassandra. Marshal refuses
// records that Unmarshal would reject, so what was written can always be
// read back; Unmarshal distrusts its input and reports anything malformed
// as ErrCorrupt.

// marshalOpts makes the encoding of a record a function of the record:
// maps are written in key order.
var marshalOpts = proto.MarshalOptions{Deterministic: true}

// encode marshals a record whose fields were checked. Only string fields
// can fail, when they are not UTF-8 (proto3 refuses those): the caller
// passed an invalid argument.
func encode(m proto.Message) ([]byte, error) {
	data, err := marshalOpts.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return data, nil
}

// corrupt reports a stored record of the kind what that cannot be used.
func corrupt(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}

// MarshalBucket encodes b for storage.
func MarshalBucket(b Bucket) ([]byte, error) {
	if err := checkBucket(b.Name, uint32(b.Versioning)); err != nil {
		return nil, fmt.Errorf("marshal bucket %q: %w", b.Name, err)
	}
	created, err := unixNanos(b.Created)
	if err != nil {
		return nil, fmt.Errorf("marshal bucket %q: created: %w", b.Name, err)
	}
	rules, err := rulesToPB(b.Lifecycle)
	if err != nil {
		return nil, fmt.Errorf("marshal bucket %q: %w", b.Name, err)
	}
	data, err := encode(&metapb.Bucket{
		Name:             b.Name,
		Id:               b.ID,
		CreatedUnixNanos: created,
		Versioning:       uint32(b.Versioning),
		Owner:            b.Owner,
		Shards:           b.Shards,
		Lifecycle:        rules,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal bucket %q: %w", b.Name, err)
	}
	return data, nil
}

// UnmarshalBucket decodes and validates a stored bucket.
func UnmarshalBucket(data []byte) (Bucket, error) {
	var pb metapb.Bucket
	if err := proto.Unmarshal(data, &pb); err != nil {
		return Bucket{}, corrupt("bucket", err)
	}
	if err := checkBucket(pb.Name, pb.Versioning); err != nil {
		return Bucket{}, corrupt("bucket", err)
	}
	rules, err := rulesFromPB(pb.Lifecycle)
	if err != nil {
		return Bucket{}, corrupt("bucket", err)
	}
	return Bucket{
		Name:       pb.Name,
		ID:         pb.Id,
		Created:    fromUnixNanos(pb.CreatedUnixNanos),
		Versioning: Versioning(pb.Versioning),
		Owner:      pb.Owner,
		Shards:     pb.Shards,
		Lifecycle:  rules,
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
	if v.NoManifest {
		// Its bytes are not known here: stored, the row would have none.
		return nil, fmt.Errorf("marshal version %s@%s: a row listed without its manifest: %w", v.Key, v.ID, ErrInvalidArgument)
	}
	// Room for the manifest, the key and what attributes most rows have.
	data, err := appendVersion(make([]byte, 0, len(v.Manifest)+len(v.Key)+256), v)
	if err != nil {
		return nil, fmt.Errorf("marshal version %s@%s: %w", v.Key, v.ID, err)
	}
	return data, nil
}

// UnmarshalVersion decodes and validates a stored row.
func UnmarshalVersion(data []byte) (*Version, error) {
	if IsApart(data) {
		return nil, corrupt("version", errors.New("its manifest is kept apart and was not joined back"))
	}
	v, err := decodeVersion(data)
	if err != nil {
		return nil, corrupt("version", err)
	}
	if err := checkVersion(v); err != nil {
		return nil, corrupt("version", err)
	}
	return v, nil
}

// VersionAttrs returns the part of an encoded row before its manifest,
// which decodes to the row without it. Fields are encoded in the order of
// their numbers and the manifest's is the last, so a scan that wants
// attributes only (ScanOptions.Attrs) copies no inline bytes, and reads
// none from the store's pages. A row it cannot parse is returned whole,
// for the decoder to report.
func VersionAttrs(row []byte) []byte {
	for b := row; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return row
		}
		if num == fieldManifest {
			return row[:len(row)-len(b)]
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return row
		}
		b = b[n+m:]
	}
	return row
}

// A store may keep a long manifest (a small file's bytes, a big file's
// chunk list) apart from its row, so that rows stay small and many share
// a page: renaming or deleting a small file then rewrites none of its
// bytes. Such a row is stored with an empty manifest field, which
// MarshalVersion never writes and UnmarshalVersion refuses: a row read
// without its manifest joined back fails instead of reading as empty.

// MarshalVersionApart encodes the row v for storage with the mark of a
// manifest kept apart in the place of v.Manifest, which must not be empty.
func MarshalVersionApart(v *Version) ([]byte, error) {
	if v == nil || len(v.Manifest) == 0 {
		return nil, fmt.Errorf("marshal version apart: no manifest: %w", ErrInvalidArgument)
	}
	attrs := *v
	attrs.Manifest = nil
	row, err := MarshalVersion(&attrs)
	if err != nil {
		return nil, err
	}
	return append(row, apartMark...), nil
}

// apartMark ends a row whose manifest is kept apart: the manifest's tag
// and a length of 0.
var apartMark = append(protowire.AppendTag(nil, fieldManifest, protowire.BytesType), 0)

// IsApart reports whether row carries the mark of a manifest kept apart.
// Every row read is asked, so most answers come from its last bytes; the
// fields are walked only when those are the mark.
func IsApart(row []byte) bool {
	if !bytes.HasSuffix(row, apartMark) {
		return false
	}
	rest := row[len(VersionAttrs(row)):]
	num, typ, n := protowire.ConsumeTag(rest)
	return n > 0 && num == fieldManifest && typ == protowire.BytesType && len(rest) == n+1 && rest[n] == 0
}

// IsNullRow reports whether the stored row is a null version, without
// decoding it: a store that removes a row learns so whether the key's
// null row goes with it, and need not read an index of null rows.
func IsNullRow(row []byte) (bool, error) {
	null := false
	err := fields(row, func(n protowire.Number, typ protowire.Type, x uint64, _ []byte) error {
		if n == fieldNull && typ == protowire.VarintType {
			null = x != 0 // the last one wins, as protobuf decodes it
		}
		return nil
	})
	if err != nil {
		return false, corrupt("version", err)
	}
	return null, nil
}

// checkVersion holds the rules both directions enforce on a row.
func checkVersion(v *Version) error {
	if err := checkAttributes(v); err != nil {
		return err
	}
	if v.ID.IsZero() {
		return fmt.Errorf("zero id: %w", ErrInvalidVersionID)
	}
	return nil
}

// checkAttributes holds the rules on a row's fields other than its id:
// an upload's template obeys them before Complete gives it an id.
func checkAttributes(v *Version) error {
	if err := ValidKey(v.Key); err != nil {
		return err
	}
	if v.Size < 0 {
		return fmt.Errorf("negative size %d: %w", v.Size, ErrInvalidArgument)
	}
	return nil
}

// MarshalUpload encodes u for storage.
func MarshalUpload(u *Upload) ([]byte, error) {
	if u == nil {
		return nil, fmt.Errorf("marshal upload: nil upload: %w", ErrInvalidArgument)
	}
	if err := checkUpload(u, uint32(u.State)); err != nil {
		return nil, fmt.Errorf("marshal upload %s of %q: %w", u.ID, u.Key, err)
	}
	initiated, err := unixNanos(u.Initiated)
	if err != nil {
		return nil, fmt.Errorf("marshal upload %s of %q: initiated: %w", u.ID, u.Key, err)
	}
	pb := &metapb.Upload{
		Key:                u.Key,
		Id:                 u.ID,
		InitiatedUnixNanos: initiated,
		State:              uint32(u.State),
		Etag:               u.ETag,
		FullObjectChecksum: u.FullObjectChecksum,
	}
	if !u.Version.IsZero() {
		pb.Version = u.Version[:]
	}
	if u.Template != nil {
		if pb.Template, err = templateToPB(u.Template); err != nil {
			return nil, fmt.Errorf("marshal upload %s of %q: template: %w", u.ID, u.Key, err)
		}
	}
	data, err := encode(pb)
	if err != nil {
		return nil, fmt.Errorf("marshal upload %s of %q: %w", u.ID, u.Key, err)
	}
	return data, nil
}

// UnmarshalUpload decodes and validates a stored upload.
func UnmarshalUpload(data []byte) (*Upload, error) {
	var pb metapb.Upload
	if err := proto.Unmarshal(data, &pb); err != nil {
		return nil, corrupt("upload", err)
	}
	u := &Upload{
		Key:       pb.Key,
		ID:        pb.Id,
		Initiated: fromUnixNanos(pb.InitiatedUnixNanos),
		State:     UploadState(pb.State), // checkUpload checks pb.State itself
		ETag:      pb.Etag,

		FullObjectChecksum: pb.FullObjectChecksum,
	}
	switch len(pb.Version) {
	case 0:
	case len(VersionID{}):
		u.Version = VersionID(pb.Version)
	default:
		return nil, corrupt("upload", fmt.Errorf("version id of %d bytes", len(pb.Version)))
	}
	if pb.Template != nil {
		t, err := templateFromPB(pb.Template)
		if err != nil {
			return nil, corrupt("upload template", err)
		}
		u.Template = t
	}
	if err := checkUpload(u, pb.State); err != nil {
		return nil, corrupt("upload", err)
	}
	return u, nil
}

// templateToPB converts an upload's template, which is encoded as a row
// is, to the message the upload's encoding embeds. Uploads are few: the
// round trip through bytes keeps one mapping of rows to the wire.
func templateToPB(t *Version) (*metapb.Version, error) {
	data, err := appendVersion(nil, t)
	if err != nil {
		return nil, err
	}
	pb := new(metapb.Version)
	if err := proto.Unmarshal(data, pb); err != nil {
		return nil, err
	}
	return pb, nil
}

// templateFromPB is the inverse of templateToPB; the caller validates.
func templateFromPB(pb *metapb.Version) (*Version, error) {
	data, err := proto.Marshal(pb)
	if err != nil {
		return nil, err
	}
	return decodeVersion(data)
}

// checkUpload holds the rules both directions enforce; state is u's state
// as stored, before it is narrowed to an UploadState.
func checkUpload(u *Upload, state uint32) error {
	if err := ValidKey(u.Key); err != nil {
		return err
	}
	if ValidUploadID(u.ID) != nil {
		return fmt.Errorf("upload id %q: %w", u.ID, ErrInvalidArgument)
	}
	if state > uint32(Completed) {
		return fmt.Errorf("upload state %d: %w", state, ErrInvalidArgument)
	}
	// Complete fixes the version id as it leaves Uploading; without it a
	// retried Complete could not write the same row again.
	if state != uint32(Uploading) && u.Version.IsZero() {
		return fmt.Errorf("upload state %d without a version id: %w", state, ErrInvalidArgument)
	}
	if t := u.Template; t != nil {
		if t.Key != u.Key {
			return fmt.Errorf("template of key %q: %w", t.Key, ErrInvalidArgument)
		}
		if err := checkAttributes(t); err != nil {
			return fmt.Errorf("template: %w", err)
		}
	}
	return nil
}

// MarshalPart encodes p for storage.
func MarshalPart(p *Part) ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("marshal part: nil part: %w", ErrInvalidArgument)
	}
	if err := checkPart(p); err != nil {
		return nil, fmt.Errorf("marshal part %d: %w", p.Number, err)
	}
	modified, err := unixNanos(p.Modified)
	if err != nil {
		return nil, fmt.Errorf("marshal part %d: modified: %w", p.Number, err)
	}
	data, err := encode(&metapb.Part{
		Number:            p.Number,
		Size:              p.Size,
		Etag:              p.ETag,
		ModifiedUnixNanos: modified,
		Checksums:         p.Checksums,
		Manifest:          p.Manifest,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal part %d: %w", p.Number, err)
	}
	return data, nil
}

// UnmarshalPart decodes and validates a stored part.
func UnmarshalPart(data []byte) (*Part, error) {
	var pb metapb.Part
	if err := proto.Unmarshal(data, &pb); err != nil {
		return nil, corrupt("part", err)
	}
	p := &Part{
		Number:   pb.Number,
		Size:     pb.Size,
		ETag:     pb.Etag,
		Modified: fromUnixNanos(pb.ModifiedUnixNanos),
	}
	if len(pb.Manifest) > 0 { // as in versionFromPB
		p.Manifest = pb.Manifest
	}
	if len(pb.Checksums) > 0 {
		p.Checksums = pb.Checksums
	}
	if err := checkPart(p); err != nil {
		return nil, corrupt("part", err)
	}
	return p, nil
}

// checkPart holds the rules both directions enforce.
func checkPart(p *Part) error {
	if p.Number < 1 || p.Number > MaxParts {
		return fmt.Errorf("part number %d outside 1..%d: %w", p.Number, MaxParts, ErrInvalidArgument)
	}
	if p.Size < 0 {
		return fmt.Errorf("negative size %d: %w", p.Size, ErrInvalidArgument)
	}
	return nil
}

// MarshalAccessKey encodes k for storage.
func MarshalAccessKey(k AccessKey) ([]byte, error) {
	if err := checkAccessKey(k); err != nil {
		return nil, fmt.Errorf("marshal access key %q: %w", k.ID, err)
	}
	created, err := unixNanos(k.Created)
	if err != nil {
		return nil, fmt.Errorf("marshal access key %q: created: %w", k.ID, err)
	}
	data, err := encode(&metapb.AccessKey{
		Id:               k.ID,
		Secret:           k.Secret,
		Name:             k.Name,
		CreatedUnixNanos: created,
		Root:             k.Root,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal access key %q: %w", k.ID, err)
	}
	return data, nil
}

// UnmarshalAccessKey decodes and validates a stored access key.
func UnmarshalAccessKey(data []byte) (AccessKey, error) {
	var pb metapb.AccessKey
	if err := proto.Unmarshal(data, &pb); err != nil {
		return AccessKey{}, corrupt("access key", err)
	}
	k := AccessKey{
		ID:      pb.Id,
		Secret:  pb.Secret,
		Name:    pb.Name,
		Created: fromUnixNanos(pb.CreatedUnixNanos),
		Root:    pb.Root,
	}
	if err := checkAccessKey(k); err != nil {
		return AccessKey{}, corrupt("access key", err)
	}
	return k, nil
}

// checkAccessKey holds the rules both directions enforce: a key without
// an id cannot be named, one without a secret would sign with "".
func checkAccessKey(k AccessKey) error {
	if k.ID == "" {
		return fmt.Errorf("empty id: %w", ErrInvalidArgument)
	}
	if k.Secret == "" {
		return fmt.Errorf("empty secret: %w", ErrInvalidArgument)
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
