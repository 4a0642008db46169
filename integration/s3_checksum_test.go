package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/stratafs/object"
)

// TestS3MultipartChecksums completes uploads created with each kind of
// checksum, with the SDK at its defaults (it sends CRC32 with every part
// unless told otherwise, and checks the sums it gets back), and compares
// the sums S3 defines with ones computed here from the bytes.
func TestS3MultipartChecksums(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	bare := s.client(true, func(o *awss3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	defer recoverMust(t)
	c.createBucket("sums")
	b1, b2 := randomBytes(object.MinPartSize+5, 21), randomBytes(777, 22)
	whole := append(append([]byte{}, b1...), b2...)
	nvme := crc64.MakeTable(0x9a6c9329ac4bc9b5)
	crc64b64 := func(b []byte) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, crc64.Checksum(b, nvme)))
	}
	sha := func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	crc := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)) }
	b64 := base64.StdEncoding.EncodeToString

	tests := []struct {
		name string
		alg  s3types.ChecksumAlgorithm
		typ  s3types.ChecksumType // "" for the default
		want string               // the object's sum
		get  func(*awss3.HeadObjectOutput) *string
	}{
		{"CRC32, composite by default", s3types.ChecksumAlgorithmCrc32, "",
			b64(composite(crc, b1, b2)) + "-2", func(o *awss3.HeadObjectOutput) *string { return o.ChecksumCRC32 }},
		{"SHA256", s3types.ChecksumAlgorithmSha256, "",
			b64(composite(sha, b1, b2)) + "-2", func(o *awss3.HeadObjectOutput) *string { return o.ChecksumSHA256 }},
		{"CRC32 of the whole object", s3types.ChecksumAlgorithmCrc32, s3types.ChecksumTypeFullObject,
			crc32b64(whole), func(o *awss3.HeadObjectOutput) *string { return o.ChecksumCRC32 }},
		{"CRC64NVME, whole object by default", s3types.ChecksumAlgorithmCrc64nvme, "",
			crc64b64(whole), func(o *awss3.HeadObjectOutput) *string { return o.ChecksumCRC64NVME }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			defer recoverMust(t)
			key := fmt.Sprint("k", i)
			wantType := s3types.ChecksumTypeComposite
			if tt.typ == s3types.ChecksumTypeFullObject || tt.alg == s3types.ChecksumAlgorithmCrc64nvme {
				wantType = s3types.ChecksumTypeFullObject
			}
			created := must(c.c.CreateMultipartUpload(c.ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("sums"),
				Key: &key, ChecksumAlgorithm: tt.alg, ChecksumType: tt.typ}))
			eq(t, "created checksum type", created.ChecksumType, wantType)
			id := created.UploadId
			var parts []s3types.CompletedPart
			for n, b := range [][]byte{b1, b2} {
				in := &awss3.UploadPartInput{Bucket: aws.String("sums"), Key: &key, UploadId: id,
					PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(b), ChecksumAlgorithm: tt.alg}
				client := c.c
				if n == 1 && tt.typ == s3types.ChecksumTypeFullObject {
					// A part of a whole-object CRC may come without its
					// CRC: the server computes it.
					in.ChecksumAlgorithm, client = "", bare
				}
				out := must(client.UploadPart(c.ctx, in))
				parts = append(parts, s3types.CompletedPart{PartNumber: aws.Int32(int32(n + 1)), ETag: out.ETag,
					ChecksumCRC32: out.ChecksumCRC32, ChecksumSHA256: out.ChecksumSHA256, ChecksumCRC64NVME: out.ChecksumCRC64NVME})
			}
			// A wrong sum of a part, or of the whole object, stores nothing.
			bad := append([]s3types.CompletedPart{}, parts...)
			bad[1].ChecksumCRC32, bad[1].ChecksumSHA256, bad[1].ChecksumCRC64NVME = wrong(bad[1].ChecksumCRC32), wrong(bad[1].ChecksumSHA256), wrong(bad[1].ChecksumCRC64NVME)
			_, err := c.complete("sums", key, *id, bad)
			wantErr(t, err, 400, "InvalidPart")
			wrongWhole := wrong(aws.String(strings.TrimSuffix(tt.want, "-2")))
			_, err = c.complete("sums", key, *id, parts, func(in *awss3.CompleteMultipartUploadInput) {
				switch tt.alg {
				case s3types.ChecksumAlgorithmCrc32:
					in.ChecksumCRC32 = wrongWhole
				case s3types.ChecksumAlgorithmSha256:
					in.ChecksumSHA256 = wrongWhole
				case s3types.ChecksumAlgorithmCrc64nvme:
					in.ChecksumCRC64NVME = wrongWhole
				}
			})
			wantErr(t, err, 400, "BadDigest")
			_, err = c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: &key})
			wantErr(t, err, 404, "NotFound")

			done := must(c.complete("sums", key, *id, parts))
			eq(t, "completed sum type", done.ChecksumType, wantType)
			head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: &key, ChecksumMode: s3types.ChecksumModeEnabled}))
			eq(t, "stored sum", aws.ToString(tt.get(head)), tt.want)
			eq(t, "stored sum type", head.ChecksumType, wantType)
			list := must(c.c.ListObjectsV2(c.ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("sums"), Prefix: &key}))
			eq(t, "listed", len(list.Contents), 1)
			eq(t, "listed algorithm", fmt.Sprint(list.Contents[0].ChecksumAlgorithm), fmt.Sprint([]s3types.ChecksumAlgorithm{tt.alg}))
			eq(t, "listed sum type", list.Contents[0].ChecksumType, wantType)
			// The SDK checks a whole-object sum against the bytes it reads.
			out := must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("sums"), Key: &key, ChecksumMode: s3types.ChecksumModeEnabled}))
			if got := must(readAll(out)); !bytes.Equal(got, whole) {
				t.Fatalf("read back %d bytes differing from the %d uploaded", len(got), len(whole))
			}
		})
	}
}

// composite is S3's COMPOSITE sum of parts: the sum of the parts' sums.
func composite(sum func([]byte) []byte, parts ...[]byte) []byte {
	var cat []byte
	for _, p := range parts {
		cat = append(cat, sum(p)...)
	}
	return sum(cat)
}

// wrong returns another valid sum of the same length, nil for nil.
func wrong(v *string) *string {
	if v == nil {
		return nil
	}
	b, _ := base64.StdEncoding.DecodeString(*v)
	b[0] ^= 0xff
	return aws.String(base64.StdEncoding.EncodeToString(b))
}
