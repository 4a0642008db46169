package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// createUpload starts a multipart upload and returns its id.
func (c s3Test) createUpload(bucket, key string, opts ...func(*awss3.CreateMultipartUploadInput)) string {
	c.t.Helper()
	in := &awss3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key}
	for _, o := range opts {
		o(in)
	}
	return *must(c.c.CreateMultipartUpload(c.ctx, in)).UploadId
}

// part uploads part n and returns it as Complete lists it.
func (c s3Test) part(bucket, key, uploadID string, n int32, body []byte) s3types.CompletedPart {
	c.t.Helper()
	out := must(c.c.UploadPart(c.ctx, &awss3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: &uploadID,
		PartNumber: &n, Body: bytes.NewReader(body)}))
	if *out.ETag != `"`+md5hex(body)+`"` {
		c.t.Fatalf("part %d: ETag %s, want the MD5 of its bytes", n, *out.ETag)
	}
	return s3types.CompletedPart{PartNumber: &n, ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
}

func (c s3Test) complete(bucket, key, uploadID string, parts []s3types.CompletedPart, opts ...func(*awss3.CompleteMultipartUploadInput)) (*awss3.CompleteMultipartUploadOutput, error) {
	in := &awss3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: &uploadID,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}
	for _, o := range opts {
		o(in)
	}
	return c.c.CompleteMultipartUpload(c.ctx, in)
}

// multipartETag is S3's ETag of an object made of these parts: the MD5
// of their MD5s (their ETags), then the number of parts.
func multipartETag(parts ...s3types.CompletedPart) string {
	h := md5.New()
	for _, p := range parts {
		s, _ := hex.DecodeString(strings.Trim(aws.ToString(p.ETag), `"`))
		h.Write(s)
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(parts))
}

func TestS3Multipart(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, checksums bool) {
		c.createBucket("parts")
		c.versioning("parts", s3types.BucketVersioningStatusEnabled)
		src := randomBytes(object.MinPartSize+s3Chunk, 7)
		c.put("parts", "src", src)
		old := c.put("parts", "big", []byte("the version the upload replaces"))

		id := c.createUpload("parts", "big", func(in *awss3.CreateMultipartUploadInput) {
			in.ContentType = aws.String("video/mp4")
			in.Metadata = map[string]string{"take": "2"}
			if checksums {
				in.ChecksumAlgorithm = s3types.ChecksumAlgorithmCrc32
			}
		})
		b1, b3 := randomBytes(object.MinPartSize+17, 8), randomBytes(1000, 9)
		b2 := src[1 : 1+object.MinPartSize]
		c.part("parts", "big", id, 3, randomBytes(2000, 10)) // replaced below
		p3 := c.part("parts", "big", id, 3, b3)
		p1 := c.part("parts", "big", id, 1, b1)
		if checksums {
			eq(t, "part checksum", aws.ToString(p1.ChecksumCRC32), crc32b64(b1))
		}
		cp := must(c.c.UploadPartCopy(c.ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("parts"), Key: aws.String("big"),
			UploadId: &id, PartNumber: aws.Int32(2), CopySource: aws.String("parts/src"),
			CopySourceRange: aws.String(fmt.Sprintf("bytes=1-%d", object.MinPartSize))}))
		if cp.CopySourceVersionId == nil || cp.CopyPartResult.ETag == nil {
			t.Fatalf("UploadPartCopy: source version %v, ETag %v", cp.CopySourceVersionId, cp.CopyPartResult.ETag)
		}
		p2 := s3types.CompletedPart{PartNumber: aws.Int32(2), ETag: cp.CopyPartResult.ETag}
		_, err := c.c.UploadPartCopy(c.ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("parts"), Key: aws.String("big"),
			UploadId: &id, PartNumber: aws.Int32(2), CopySource: aws.String("parts/src"), CopySourceIfMatch: aws.String(`"0000"`)})
		wantErr(t, err, 412, "PreconditionFailed")
		_, err = c.c.UploadPartCopy(c.ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("parts"), Key: aws.String("big"),
			UploadId: &id, PartNumber: aws.Int32(2), CopySource: aws.String("parts/src"),
			CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", len(src)))})
		wantErr(t, err, 400, "InvalidArgument")

		// ListParts pages by part number and tells who started the upload.
		lp := must(c.c.ListParts(c.ctx, &awss3.ListPartsInput{Bucket: aws.String("parts"), Key: aws.String("big"),
			UploadId: &id, MaxParts: aws.Int32(2)}))
		eq(t, "first page of parts", len(lp.Parts), 2)
		eq(t, "truncated", aws.ToBool(lp.IsTruncated), true)
		eq(t, "next marker", aws.ToString(lp.NextPartNumberMarker), "2")
		eq(t, "initiator", aws.ToString(lp.Initiator.DisplayName), "root")
		eq(t, "owner", aws.ToString(lp.Owner.DisplayName), "root")
		eq(t, "storage class", lp.StorageClass, s3types.StorageClassStandard)
		eq(t, "part 1 size", aws.ToInt64(lp.Parts[0].Size), int64(len(b1)))
		eq(t, "part 2 ETag", aws.ToString(lp.Parts[1].ETag), aws.ToString(p2.ETag))
		if checksums {
			eq(t, "upload checksum algorithm", lp.ChecksumAlgorithm, s3types.ChecksumAlgorithmCrc32)
			eq(t, "listed part checksum", aws.ToString(lp.Parts[0].ChecksumCRC32), crc32b64(b1))
		}
		lp = must(c.c.ListParts(c.ctx, &awss3.ListPartsInput{Bucket: aws.String("parts"), Key: aws.String("big"),
			UploadId: &id, PartNumberMarker: lp.NextPartNumberMarker}))
		eq(t, "second page", len(lp.Parts), 1)
		eq(t, "last part", aws.ToInt32(lp.Parts[0].PartNumber), int32(3))
		eq(t, "last part ETag", aws.ToString(lp.Parts[0].ETag), `"`+md5hex(b3)+`"`)
		eq(t, "not truncated", aws.ToBool(lp.IsTruncated), false)

		// Complete refuses bad lists and leaves the upload to be fixed.
		_, err = c.complete("parts", "big", id, []s3types.CompletedPart{p2, p1})
		wantErr(t, err, 400, "InvalidPartOrder")
		_, err = c.complete("parts", "big", id, []s3types.CompletedPart{p1, {PartNumber: aws.Int32(2), ETag: p1.ETag}})
		wantErr(t, err, 400, "InvalidPart")
		_, err = c.complete("parts", "big", id, []s3types.CompletedPart{p3, {PartNumber: aws.Int32(4), ETag: p1.ETag}})
		wantErr(t, err, 400, "EntityTooSmall")
		_, err = c.complete("parts", "big", id, []s3types.CompletedPart{p1, p2, p3},
			func(in *awss3.CompleteMultipartUploadInput) { in.IfNoneMatch = aws.String("*") })
		wantErr(t, err, 412, "PreconditionFailed")
		_, err = c.complete("parts", "big", "0123456789abcdef0123456789abcdef", []s3types.CompletedPart{p1})
		wantErr(t, err, 404, "NoSuchUpload")
		_, got := c.get("parts", "big", "")
		eq(t, "object after refused completes", string(got), "the version the upload replaces")

		// ETags are taken quoted or not.
		bare := p3
		bare.ETag = aws.String(strings.Trim(*p3.ETag, `"`))
		done := must(c.complete("parts", "big", id, []s3types.CompletedPart{p1, p2, bare},
			func(in *awss3.CompleteMultipartUploadInput) { in.IfMatch = old.ETag }))
		whole := bytes.Join([][]byte{b1, b2, b3}, nil)
		eq(t, "multipart ETag", aws.ToString(done.ETag), multipartETag(p1, p2, p3))
		if done.VersionId == nil || *done.VersionId == aws.ToString(old.VersionId) {
			t.Fatalf("completed version id %v", done.VersionId)
		}
		again := must(c.complete("parts", "big", id, []s3types.CompletedPart{p1, p2, p3}))
		eq(t, "repeated Complete ETag", aws.ToString(again.ETag), aws.ToString(done.ETag))
		eq(t, "repeated Complete version", aws.ToString(again.VersionId), aws.ToString(done.VersionId))

		out, got := c.get("parts", "big", "")
		if !bytes.Equal(got, whole) {
			t.Fatalf("completed object: %d bytes differing from the %d uploaded", len(got), len(whole))
		}
		eq(t, "Content-Type", aws.ToString(out.ContentType), "video/mp4")
		eq(t, "metadata", fmt.Sprint(out.Metadata), "map[take:2]")
		eq(t, "version", aws.ToString(out.VersionId), aws.ToString(done.VersionId))

		// partNumber reads one part; a single-part object is one part.
		for n, want := range map[int32][]byte{1: b1, 2: b2, 3: b3} {
			out := must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("parts"), Key: aws.String("big"), PartNumber: &n}))
			part := must(readAll(out))
			if !bytes.Equal(part, want) {
				t.Fatalf("part %d: %d bytes differing from the %d uploaded", n, len(part), len(want))
			}
			eq(t, "parts count", aws.ToInt32(out.PartsCount), int32(3))
			eq(t, "part ETag", aws.ToString(out.ETag), aws.ToString(done.ETag))
		}
		head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("parts"), Key: aws.String("big"), PartNumber: aws.Int32(3)}))
		eq(t, "HEAD part 3 length", aws.ToInt64(head.ContentLength), int64(len(b3)))
		eq(t, "HEAD part 3 range", aws.ToString(head.ContentRange), fmt.Sprintf("bytes %d-%d/%d", len(whole)-len(b3), len(whole)-1, len(whole)))
		_, err = c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("parts"), Key: aws.String("big"), PartNumber: aws.Int32(4)})
		eq(t, "HEAD part 4", errOf(t, err).status, 416)
		single := must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("parts"), Key: aws.String("src"), PartNumber: aws.Int32(1)}))
		if got := must(readAll(single)); !bytes.Equal(got, src) || single.PartsCount != nil {
			t.Fatalf("part 1 of a single-part object: %d bytes, parts count %v", len(got), single.PartsCount)
		}

		// Abort removes an upload; it blocks DeleteBucket while it lasts.
		id2 := c.createUpload("parts", "aborted")
		c.part("parts", "aborted", id2, 1, []byte("x"))
		ups := must(c.c.ListMultipartUploads(c.ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("parts")}))
		eq(t, "uploads in progress", len(ups.Uploads), 1)
		eq(t, "upload listed", aws.ToString(ups.Uploads[0].UploadId), id2)
		eq(t, "upload initiator", aws.ToString(ups.Uploads[0].Initiator.DisplayName), "root")
		for _, row := range c.versions("parts", 1000) {
			key, v, _ := strings.Cut(strings.TrimSuffix(row, "*"), "@")
			c.del("parts", key, v)
		}
		_, err = c.c.DeleteBucket(c.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("parts")})
		wantErr(t, err, 409, "BucketNotEmpty")
		must(c.c.AbortMultipartUpload(c.ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String("parts"), Key: aws.String("aborted"), UploadId: &id2}))
		_, err = c.c.AbortMultipartUpload(c.ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String("parts"), Key: aws.String("aborted"), UploadId: &id2})
		wantErr(t, err, 404, "NoSuchUpload")
		_, err = c.c.UploadPart(c.ctx, &awss3.UploadPartInput{Bucket: aws.String("parts"), Key: aws.String("aborted"),
			UploadId: &id2, PartNumber: aws.Int32(2), Body: strings.NewReader("late")})
		wantErr(t, err, 404, "NoSuchUpload")
		_, err = c.c.ListParts(c.ctx, &awss3.ListPartsInput{Bucket: aws.String("parts"), Key: aws.String("aborted"), UploadId: &id2})
		wantErr(t, err, 404, "NoSuchUpload")
		must(c.c.DeleteBucket(c.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("parts")}))
	})
}

func readAll(out *awss3.GetObjectOutput) ([]byte, error) {
	defer out.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(out.Body)
	return b.Bytes(), err
}

func TestS3ListUploads(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("uploads")
	ids := map[string][]string{}
	for _, k := range []string{"a/1", "a/2", "b", "b", "c/x/y", "c/z", "d e+f"} {
		ids[k] = append(ids[k], c.createUpload("uploads", k))
	}
	// One upload completed, one aborted: neither is listed.
	for _, k := range []string{"gone", "done"} {
		id := c.createUpload("uploads", k)
		if k == "gone" {
			must(c.c.AbortMultipartUpload(c.ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String("uploads"), Key: &k, UploadId: &id}))
			continue
		}
		must(c.complete("uploads", k, id, []s3types.CompletedPart{c.part("uploads", k, id, 1, []byte("x"))}))
	}

	// list pages through the uploads, n entries a page, and renders
	// each entry as key@id or a common prefix as prefix/.
	list := func(prefix, delim string, n int32) string {
		var got []string
		in := &awss3.ListMultipartUploadsInput{Bucket: aws.String("uploads"), MaxUploads: &n}
		if prefix != "" {
			in.Prefix = &prefix
		}
		if delim != "" {
			in.Delimiter = &delim
		}
		for {
			page := must(c.c.ListMultipartUploads(c.ctx, in))
			if len(page.Uploads)+len(page.CommonPrefixes) > int(n) {
				t.Fatalf("page of %d entries, max %d", len(page.Uploads)+len(page.CommonPrefixes), n)
			}
			for _, u := range page.Uploads {
				got = append(got, *u.Key+"@"+*u.UploadId)
			}
			for _, p := range page.CommonPrefixes {
				got = append(got, *p.Prefix)
			}
			if !aws.ToBool(page.IsTruncated) {
				return strings.Join(got, " ")
			}
			in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
		}
	}
	all := fmt.Sprintf("a/1@%s a/2@%s b@%s b@%s c/x/y@%s c/z@%s d e+f@%s",
		ids["a/1"][0], ids["a/2"][0], ids["b"][0], ids["b"][1], ids["c/x/y"][0], ids["c/z"][0], ids["d e+f"][0])
	for _, n := range []int32{1, 2, 3, 1000} {
		eq(t, fmt.Sprintf("uploads in pages of %d", n), list("", "", n), all)
	}
	rolled := fmt.Sprintf("b@%s b@%s d e+f@%s a/ c/", ids["b"][0], ids["b"][1], ids["d e+f"][0])
	eq(t, "delimited, one page", list("", "/", 1000), rolled)
	eq(t, "delimited, pages of 1", list("", "/", 1), fmt.Sprintf("a/ b@%s b@%s c/ d e+f@%s", ids["b"][0], ids["b"][1], ids["d e+f"][0]))
	eq(t, "prefix and delimiter", list("c/", "/", 1), fmt.Sprintf("c/x/ c/z@%s", ids["c/z"][0]))
	eq(t, "prefix", list("a/", "", 1000), fmt.Sprintf("a/1@%s a/2@%s", ids["a/1"][0], ids["a/2"][0]))

	// key-marker alone starts after every upload of that key.
	page := must(c.c.ListMultipartUploads(c.ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("uploads"), KeyMarker: aws.String("b")}))
	eq(t, "after key b", aws.ToString(page.Uploads[0].Key), "c/x/y")

	resp := s.send(t, s.build(t, rawRequest{method: "GET", path: "/uploads?uploads&encoding-type=url&prefix=d%20"}))
	eq(t, "url-encoded listing", resp.status, 200)
	for _, want := range []string{"<Key>d%20e%2Bf</Key>", "<Prefix>d%20</Prefix>", "<EncodingType>url</EncodingType>"} {
		if !strings.Contains(string(resp.body), want) {
			t.Fatalf("listing lacks %s:\n%s", want, resp.body)
		}
	}
	resp = s.send(t, s.build(t, rawRequest{method: "GET", path: "/uploads/d%20e%2Bf?uploadId=" + ids["d e+f"][0] + "&encoding-type=url"}))
	if resp.status != 200 || !strings.Contains(string(resp.body), "<Key>d%20e%2Bf</Key>") {
		t.Fatalf("url-encoded ListParts: %d\n%s", resp.status, resp.body)
	}
}

// uploadSnapshot renders a bucket's rows, uploads and their parts, to
// show that a refused request stored nothing.
func (s *s3Server) uploadSnapshot(t *testing.T, bucket string) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	sb.WriteString(s.snapshot(t, bucket))
	ups, err := s.svc.ListUploads(ctx, bucket, meta.UploadListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		fmt.Fprintf(&sb, " upload %s@%s:", u.Key, u.ID)
		parts, err := s.svc.Parts(ctx, bucket, u.Key, u.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			fmt.Fprintf(&sb, " %d:%s:%v", p.Number, p.ETag, p.Checksums)
		}
	}
	return sb.String()
}

func TestS3MultipartBadRequests(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("badmp")
	c.put("badmp", "src", []byte("source"))
	id := c.createUpload("badmp", "k", func(in *awss3.CreateMultipartUploadInput) {
		in.ChecksumAlgorithm = s3types.ChecksumAlgorithmSha256
	})
	must(c.c.UploadPart(c.ctx, &awss3.UploadPartInput{Bucket: aws.String("badmp"), Key: aws.String("k"), UploadId: &id,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part one"), ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256}))
	before := s.uploadSnapshot(t, "badmp")
	upload := "/badmp/k?uploadId=" + id
	part := upload + "&partNumber=2"
	sha := map[string]string{"x-amz-checksum-sha256": b64SHA256([]byte("data"))}
	withSHA := func(h map[string]string) map[string]string {
		maps.Copy(h, sha)
		return h
	}
	complete := func(parts string) []byte {
		return []byte("<CompleteMultipartUpload>" + parts + "</CompleteMultipartUpload>")
	}
	part1 := `<Part><PartNumber>1</PartNumber><ETag>"` + md5hex([]byte("part one")) + `"</ETag></Part>`
	part1sha := strings.Replace(part1, "</Part>", "<ChecksumSHA256>"+b64SHA256([]byte("part one"))+"</ChecksumSHA256></Part>", 1)

	tests := []struct {
		name   string
		req    rawRequest
		status int
		code   string
	}{
		{"Complete malformed XML", rawRequest{method: "POST", path: upload, body: []byte("<CompleteMultipartUpload><Part>")}, 400, "MalformedXML"},
		{"Complete wrong root", rawRequest{method: "POST", path: upload, body: []byte("<Complete>" + part1 + "</Complete>")}, 400, "MalformedXML"},
		{"Complete without parts", rawRequest{method: "POST", path: upload, body: complete("")}, 400, "MalformedXML"},
		{"Complete part without ETag", rawRequest{method: "POST", path: upload, body: complete("<Part><PartNumber>1</PartNumber></Part>")}, 400, "MalformedXML"},
		{"Complete part number not a number", rawRequest{method: "POST", path: upload,
			body: complete("<Part><PartNumber>one</PartNumber><ETag>x</ETag></Part>")}, 400, "MalformedXML"},
		{"Complete with trailing element", rawRequest{method: "POST", path: upload, body: append(complete(part1), "<More/>"...)}, 400, "MalformedXML"},
		{"Complete with trailing text", rawRequest{method: "POST", path: upload, body: append(complete(part1), "junk"...)}, 400, "MalformedXML"},
		{"Complete part number 0", rawRequest{method: "POST", path: upload,
			body: complete("<Part><PartNumber>0</PartNumber><ETag>x</ETag></Part>")}, 400, "InvalidPart"},
		{"Complete wrong Content-MD5", rawRequest{method: "POST", path: upload, body: complete(part1),
			header: map[string]string{"Content-MD5": b64MD5([]byte("other"))}}, 400, "BadDigest"},
		{"Complete If-None-Match other than *", rawRequest{method: "POST", path: upload, body: complete(part1),
			header: map[string]string{"If-None-Match": `"abc"`}}, 501, "NotImplemented"},
		{"Complete with a whole-object checksum of another algorithm", rawRequest{method: "POST", path: upload, body: complete(part1sha),
			header: map[string]string{"x-amz-checksum-crc32": crc32b64([]byte("whole"))}}, 400, "BadDigest"},
		{"Complete with a wrong whole-object checksum", rawRequest{method: "POST", path: upload, body: complete(part1sha),
			header: map[string]string{"x-amz-checksum-sha256": b64SHA256([]byte("whole")) + "-1"}}, 400, "BadDigest"},
		{"Complete without a part's checksum", rawRequest{method: "POST", path: upload, body: complete(part1)}, 400, "InvalidRequest"},
		{"Complete with a wrong part checksum", rawRequest{method: "POST", path: upload,
			body: complete(strings.Replace(part1sha, b64SHA256([]byte("part one")), b64SHA256([]byte("part two")), 1))}, 400, "InvalidPart"},
		{"Complete with a part checksum of another algorithm", rawRequest{method: "POST", path: upload,
			body: complete(strings.Replace(part1, "</Part>", "<ChecksumCRC32>"+crc32b64([]byte("part one"))+"</ChecksumCRC32></Part>", 1))}, 400, "InvalidPart"},
		{"Complete in another checksum mode", rawRequest{method: "POST", path: upload, body: complete(part1sha),
			header: map[string]string{"x-amz-checksum-type": "FULL_OBJECT"}}, 400, "InvalidRequest"},
		{"Complete with a wrong object size", rawRequest{method: "POST", path: upload, body: complete(part1sha),
			header: map[string]string{"x-amz-mp-object-size": "9"}}, 400, "InvalidRequest"},
		{"Complete unknown upload", rawRequest{method: "POST", path: "/badmp/k?uploadId=00000000000000000000000000000000", body: complete(part1)}, 404, "NoSuchUpload"},
		{"Complete malformed upload id", rawRequest{method: "POST", path: "/badmp/k?uploadId=x", body: complete(part1)}, 404, "NoSuchUpload"},
		{"Complete of another key's upload", rawRequest{method: "POST", path: "/badmp/other?uploadId=" + id, body: complete(part1)}, 404, "NoSuchUpload"},
		{"UploadPart wrong Content-MD5", rawRequest{method: "PUT", path: part, body: []byte("data"),
			header: withSHA(map[string]string{"Content-MD5": b64MD5([]byte("other"))})}, 400, "BadDigest"},
		{"UploadPart wrong SHA256", rawRequest{method: "PUT", path: part, body: []byte("datum"), header: withSHA(map[string]string{})}, 400, "BadDigest"},
		{"UploadPart without the upload's checksum", rawRequest{method: "PUT", path: part, body: []byte("data")}, 400, "InvalidRequest"},
		{"UploadPart with another checksum", rawRequest{method: "PUT", path: part, body: []byte("data"),
			header: map[string]string{"x-amz-checksum-crc32": crc32b64([]byte("data"))}}, 400, "InvalidRequest"},
		{"UploadPart number 0", rawRequest{method: "PUT", path: upload + "&partNumber=0", body: []byte("data"), header: sha}, 400, "InvalidArgument"},
		{"UploadPart number 10001", rawRequest{method: "PUT", path: upload + "&partNumber=10001", body: []byte("data"), header: sha}, 400, "InvalidArgument"},
		{"UploadPart without a number", rawRequest{method: "PUT", path: upload, body: []byte("data"), header: sha}, 400, "InvalidArgument"},
		{"UploadPart unknown upload", rawRequest{method: "PUT", path: "/badmp/k?partNumber=2&uploadId=00000000000000000000000000000000",
			body: []byte("data"), header: sha}, 404, "NoSuchUpload"},
		{"UploadPart with SSE", rawRequest{method: "PUT", path: part, body: []byte("data"),
			header: withSHA(map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256"})}, 501, "NotImplemented"},
		{"UploadPartCopy range without end", rawRequest{method: "PUT", path: part,
			header: map[string]string{"x-amz-copy-source": "badmp/src", "x-amz-copy-source-range": "bytes=1-"}}, 400, "InvalidArgument"},
		{"UploadPartCopy reversed range", rawRequest{method: "PUT", path: part,
			header: map[string]string{"x-amz-copy-source": "badmp/src", "x-amz-copy-source-range": "bytes=3-1"}}, 400, "InvalidArgument"},
		{"UploadPartCopy range past the end", rawRequest{method: "PUT", path: part,
			header: map[string]string{"x-amz-copy-source": "badmp/src", "x-amz-copy-source-range": "bytes=0-6"}}, 400, "InvalidArgument"},
		{"UploadPartCopy missing source", rawRequest{method: "PUT", path: part, header: map[string]string{"x-amz-copy-source": "badmp/nope"}}, 404, "NoSuchKey"},
		{"UploadPartCopy unmodified-since", rawRequest{method: "PUT", path: part, header: map[string]string{"x-amz-copy-source": "badmp/src",
			"x-amz-copy-source-if-unmodified-since": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}}, 412, "PreconditionFailed"},
		{"CreateMultipartUpload unknown checksum", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-checksum-algorithm": "MD4"}}, 400, "InvalidRequest"},
		{"CopyObject computing a new checksum", rawRequest{method: "PUT", path: "/badmp/copy",
			header: map[string]string{"x-amz-copy-source": "badmp/src", "x-amz-checksum-algorithm": "SHA256"}}, 501, "NotImplemented"},
		{"CopyObject unknown checksum", rawRequest{method: "PUT", path: "/badmp/copy",
			header: map[string]string{"x-amz-copy-source": "badmp/src", "x-amz-checksum-algorithm": "MD4"}}, 400, "InvalidRequest"},
		{"CreateMultipartUpload SHA256 of the whole object", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-checksum-algorithm": "SHA256", "x-amz-checksum-type": "FULL_OBJECT"}}, 400, "InvalidRequest"},
		{"CreateMultipartUpload composite CRC64NVME", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "COMPOSITE"}}, 400, "InvalidRequest"},
		{"CreateMultipartUpload checksum type alone", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-checksum-type": "COMPOSITE"}}, 400, "InvalidRequest"},
		{"CreateMultipartUpload with SSE", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-server-side-encryption": "aws:kms"}}, 501, "NotImplemented"},
		{"CreateMultipartUpload oversized metadata", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-meta-a": strings.Repeat("v", 2100)}}, 400, "MetadataTooLarge"},
		{"CreateMultipartUpload bad storage class", rawRequest{method: "POST", path: "/badmp/new?uploads",
			header: map[string]string{"x-amz-storage-class": "COLD"}}, 400, "InvalidStorageClass"},
		{"Abort unknown upload", rawRequest{method: "DELETE", path: "/badmp/k?uploadId=00000000000000000000000000000000"}, 404, "NoSuchUpload"},
		{"ListParts bad max-parts", rawRequest{method: "GET", path: upload + "&max-parts=-1"}, 400, "InvalidArgument"},
		{"ListUploads bad max-uploads", rawRequest{method: "GET", path: "/badmp?uploads&max-uploads=x"}, 400, "InvalidArgument"},
		{"GET partNumber with Range", rawRequest{method: "GET", path: "/badmp/src?partNumber=1", header: map[string]string{"Range": "bytes=0-1"}}, 400, "InvalidRequest"},
		{"GET partNumber 0", rawRequest{method: "GET", path: "/badmp/src?partNumber=0"}, 400, "InvalidArgument"},
		{"GET partNumber 2 of a single part", rawRequest{method: "GET", path: "/badmp/src?partNumber=2"}, 416, "InvalidPartNumber"},
		{"PUT with partNumber alone", rawRequest{method: "PUT", path: "/badmp/src?partNumber=1", body: []byte("data")}, 501, "NotImplemented"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkError(t, s.send(t, s.build(t, tt.req)), tt.status, tt.code)
			if got := s.uploadSnapshot(t, "badmp"); got != before {
				t.Fatalf("stored something:\n got %s\nwant %s", got, before)
			}
		})
	}
	t.Run("truncated part", func(t *testing.T) {
		resp := s.sendTruncated(t, rawRequest{method: "PUT", path: "/badmp/k?partNumber=2&uploadId=" + id,
			body: bytes.Repeat([]byte("x"), 100), payload: sigv4.UnsignedPayload, header: sha}, 50)
		checkError(t, resp, 400, "IncompleteBody")
		eq(t, "snapshot", s.uploadSnapshot(t, "badmp"), before)
	})
}
