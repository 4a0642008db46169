package integration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestS3ObjectAttributes drives GetObjectAttributes with the SDK: every
// attribute of a plain and of a multipart object, only those asked for,
// an older version by id, and a delete marker, hiding the key or asked
// for by id.
func TestS3ObjectAttributes(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("attr")
		c.versioning("attr", s3types.BucketVersioningStatusEnabled)
		attrs := func(key, versionID string, names ...s3types.ObjectAttributes) (*awss3.GetObjectAttributesOutput, error) {
			in := &awss3.GetObjectAttributesInput{Bucket: aws.String("attr"), Key: aws.String(key), ObjectAttributes: names}
			if versionID != "" {
				in.VersionId = aws.String(versionID)
			}
			return c.c.GetObjectAttributes(c.ctx, in)
		}
		all := []s3types.ObjectAttributes{s3types.ObjectAttributesEtag, s3types.ObjectAttributesChecksum,
			s3types.ObjectAttributesObjectParts, s3types.ObjectAttributesStorageClass, s3types.ObjectAttributesObjectSize}

		body := []byte("attributes")
		put := c.put("attr", "k", body)
		out := must(attrs("k", "", all...))
		eq(t, "ETag (unquoted, as S3 gives it here)", aws.ToString(out.ETag), strings.Trim(aws.ToString(put.ETag), `"`))
		eq(t, "size", aws.ToInt64(out.ObjectSize), int64(len(body)))
		eq(t, "storage class", out.StorageClass, s3types.StorageClassStandard)
		eq(t, "version id", aws.ToString(out.VersionId), aws.ToString(put.VersionId))
		if out.LastModified == nil || time.Since(*out.LastModified) > time.Minute {
			t.Errorf("Last-Modified %v", out.LastModified)
		}
		if out.ObjectParts != nil {
			t.Errorf("a plain object has parts: %+v", out.ObjectParts)
		}
		if put.ChecksumCRC32 == nil {
			if out.Checksum != nil {
				t.Errorf("checksum %+v of an object stored without one", out.Checksum)
			}
		} else if out.Checksum == nil || aws.ToString(out.Checksum.ChecksumCRC32) != *put.ChecksumCRC32 ||
			out.Checksum.ChecksumType != s3types.ChecksumTypeFullObject {
			t.Errorf("checksum %+v, want CRC32 %s, FULL_OBJECT", out.Checksum, *put.ChecksumCRC32)
		}

		// Only what is asked for.
		out = must(attrs("k", "", s3types.ObjectAttributesObjectSize))
		if out.ETag != nil || out.Checksum != nil || out.StorageClass != "" || aws.ToInt64(out.ObjectSize) != int64(len(body)) {
			t.Errorf("asked for the size: ETag %v, checksum %v, class %q, size %v", out.ETag, out.Checksum, out.StorageClass, out.ObjectSize)
		}

		// A multipart object: its parts are counted.
		id := c.createUpload("attr", "mp")
		parts := []s3types.CompletedPart{c.part("attr", "mp", id, 1, bytes.Repeat([]byte("p"), 5<<20)), c.part("attr", "mp", id, 2, []byte("tail"))}
		done := must(c.complete("attr", "mp", id, parts))
		out = must(attrs("mp", "", all...))
		if out.ObjectParts == nil || aws.ToInt32(out.ObjectParts.TotalPartsCount) != 2 {
			t.Errorf("parts %+v, want 2 counted", out.ObjectParts)
		}
		eq(t, "multipart ETag", aws.ToString(out.ETag), strings.Trim(aws.ToString(done.ETag), `"`))
		eq(t, "multipart size", aws.ToInt64(out.ObjectSize), int64(5<<20+4))

		// An older version by id; a delete marker.
		c.put("attr", "k", []byte("two"))
		out = must(attrs("k", aws.ToString(put.VersionId), s3types.ObjectAttributesObjectSize))
		eq(t, "older version's size", aws.ToInt64(out.ObjectSize), int64(len(body)))
		eq(t, "older version's id", aws.ToString(out.VersionId), aws.ToString(put.VersionId))
		marker := aws.ToString(c.del("attr", "k", "").VersionId)
		_, err := attrs("k", "", all...)
		e := wantErr(t, err, 404, "NoSuchKey")
		eq(t, "x-amz-delete-marker", e.header.Get("x-amz-delete-marker"), "true")
		eq(t, "the marker's id", e.header.Get("x-amz-version-id"), marker)
		_, err = attrs("k", marker, all...)
		wantErr(t, err, 405, "MethodNotAllowed")
		_, err = attrs("absent", "", all...)
		wantErr(t, err, 404, "NoSuchKey")
	})
}
