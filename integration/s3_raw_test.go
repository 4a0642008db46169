package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// Raw requests: what the SDK would refuse to send, or sends only one way.
// Each is signed by the SDK's signer (or deliberately not, or badly) and
// sent with net/http to the loopback listener.

var rootCreds = aws.Credentials{AccessKeyID: s3AccessKey, SecretAccessKey: s3SecretKey}

// rawRequest describes one hand-made request. Paths are path style.
type rawRequest struct {
	method, path string
	body         []byte
	header       map[string]string
	payload      string          // x-amz-content-sha256; the body's SHA-256 when empty
	at           time.Time       // signing time; now when zero
	creds        aws.Credentials // rootCreds when zero
	unsigned     bool            // send without any signature
	after        func(*http.Request)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func b64MD5(b []byte) string {
	s := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func b64SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// build makes and signs the request.
func (s *s3Server) build(t *testing.T, rr rawRequest) *http.Request {
	t.Helper()
	r, err := http.NewRequest(rr.method, s.url+rr.path, bytes.NewReader(rr.body))
	if err != nil {
		t.Fatal(err)
	}
	if rr.body == nil {
		r.Body, r.ContentLength = http.NoBody, 0
	}
	for k, v := range rr.header {
		r.Header.Set(k, v)
	}
	if !rr.unsigned {
		if rr.payload == "" {
			rr.payload = hexSHA256(rr.body)
		}
		if rr.at.IsZero() {
			rr.at = time.Now()
		}
		if rr.creds.AccessKeyID == "" {
			rr.creds = rootCreds
		}
		signRaw(t, r, rr.payload, rr.at, rr.creds)
	}
	if rr.after != nil {
		rr.after(r)
	}
	return r
}

// signRaw signs r as S3 clients do: x-amz-content-sha256 set and signed,
// the path signed as sent.
func signRaw(t *testing.T, r *http.Request, payload string, at time.Time, creds aws.Credentials) {
	t.Helper()
	r.Header.Set("X-Amz-Content-Sha256", payload)
	err := v4.NewSigner().SignHTTP(context.Background(), creds, r, payload, "s3", "us-east-1", at,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
}

// rawResponse is a response read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func (s *s3Server) send(t *testing.T, r *http.Request) rawResponse {
	t.Helper()
	resp, err := (&http.Client{Transport: s.tr}).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{resp.StatusCode, resp.Header, body}
}

// checkError asserts an S3 error response: status, code, and the request
// id both in x-amz-request-id and in the body.
func checkError(t *testing.T, resp rawResponse, status int, code string) {
	t.Helper()
	var doc struct {
		Code      string
		RequestID string `xml:"RequestId"`
	}
	if err := xml.Unmarshal(resp.body, &doc); err != nil && status != 0 {
		t.Fatalf("status %d, body %q: %v", resp.status, resp.body, err)
	}
	if resp.status != status || doc.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", resp.status, doc.Code, resp.body, status, code)
	}
	id := resp.header.Get("x-amz-request-id")
	if len(id) != 16 || doc.RequestID != id {
		t.Fatalf("request id: header %q, body %q", id, doc.RequestID)
	}
}

// snapshot renders every row of a bucket and its versioning state, to
// show that a refused request stored nothing.
func (s *s3Server) snapshot(t *testing.T, bucket string) string {
	t.Helper()
	ctx := context.Background()
	b, err := s.svc.Bucket(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.svc.ListVersions(ctx, bucket, meta.VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s;", b.Versioning)
	for _, v := range res.Versions {
		fmt.Fprintf(&sb, " %s@%s:%s:%v:%v", v.Key, v.WireID(), v.ETag, v.DeleteMarker, v.UserMeta)
	}
	return sb.String()
}

// chunkedSigned frames data as a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body
// in chunks of n bytes, chained from the request's signature.
func chunkedSigned(t *testing.T, r *http.Request, data []byte, n int, at time.Time) []byte {
	t.Helper()
	auth := r.Header.Get("Authorization")
	seed, err := hex.DecodeString(auth[strings.LastIndex(auth, "=")+1:])
	if err != nil {
		t.Fatal(err)
	}
	ss := v4.NewStreamSigner(rootCreds, "s3", "us-east-1", seed)
	var b bytes.Buffer
	for off := 0; ; off += n {
		chunk := data[min(off, len(data)):min(off+n, len(data))]
		sig, err := ss.GetSignature(context.Background(), nil, chunk, at)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x;chunk-signature=%x\r\n%s\r\n", len(chunk), sig, chunk)
		if len(chunk) == 0 {
			return b.Bytes()
		}
	}
}

func TestS3BadRequests(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("bad")
	c.put("bad", "keep", []byte("original"), func(in *awss3PutInput) { in.Metadata = map[string]string{"m": "1"} })
	before := s.snapshot(t, "bad")
	now := time.Now()
	manyKeys := "<Delete>" + strings.Repeat("<Object><Key>keep</Key></Object>", 1001) + "</Delete>"
	longKey := "/bad/" + strings.Repeat("k", 1025)

	tests := []struct {
		name   string
		req    rawRequest
		status int
		code   string
	}{
		{"DeleteObjects malformed XML", rawRequest{method: "POST", path: "/bad?delete",
			body: []byte("<Delete><Object><Key>keep</Key></Object>")}, 400, "MalformedXML"},
		{"DeleteObjects not XML", rawRequest{method: "POST", path: "/bad?delete", body: []byte("keep")}, 400, "MalformedXML"},
		{"DeleteObjects wrong root", rawRequest{method: "POST", path: "/bad?delete",
			body: []byte("<Remove><Object><Key>keep</Key></Object></Remove>")}, 400, "MalformedXML"},
		{"DeleteObjects of 1001 keys", rawRequest{method: "POST", path: "/bad?delete", body: []byte(manyKeys)}, 400, "MalformedXML"},
		{"DeleteObjects wrong Content-MD5", rawRequest{method: "POST", path: "/bad?delete",
			body:   []byte("<Delete><Object><Key>keep</Key></Object></Delete>"),
			header: map[string]string{"Content-MD5": b64MD5([]byte("other"))}}, 400, "BadDigest"},
		{"versioning malformed XML", rawRequest{method: "PUT", path: "/bad?versioning",
			body: []byte("<VersioningConfiguration><Status>Enabled")}, 400, "MalformedXML"},
		{"versioning bad status", rawRequest{method: "PUT", path: "/bad?versioning",
			body: []byte("<VersioningConfiguration><Status>On</Status></VersioningConfiguration>")}, 400, "IllegalVersioningConfigurationException"},
		{"CreateBucket malformed XML", rawRequest{method: "PUT", path: "/newbucket",
			body: []byte("<CreateBucketConfiguration>")}, 400, "MalformedXML"},
		{"wrong Content-MD5", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"Content-MD5": b64MD5([]byte("other"))}}, 400, "BadDigest"},
		{"invalid Content-MD5", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"Content-MD5": "not base64!"}}, 400, "InvalidDigest"},
		{"wrong CRC32", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-checksum-crc32": crc32b64([]byte("other"))}}, 400, "BadDigest"},
		{"invalid CRC32", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-checksum-crc32": "abc"}}, 400, "InvalidRequest"},
		{"two checksums", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-checksum-crc32": crc32b64([]byte("data")),
				"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(make([]byte, 32))}}, 400, "InvalidRequest"},
		{"checksum algorithm without a value", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-sdk-checksum-algorithm": "CRC32"}}, 400, "InvalidRequest"},
		{"wrong trailing CRC32", rawRequest{method: "PUT", path: "/bad/keep",
			body:    []byte("4\r\ndata\r\n0\r\nx-amz-checksum-crc32:" + crc32b64([]byte("other")) + "\r\n\r\n"),
			payload: sigv4.StreamingUnsignedTrailer,
			header: map[string]string{"x-amz-trailer": "x-amz-checksum-crc32", "x-amz-decoded-content-length": "4",
				"Content-Encoding": "aws-chunked"}}, 400, "BadDigest"},
		{"trailer missing", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("4\r\ndata\r\n0\r\n\r\n"),
			payload: sigv4.StreamingUnsignedTrailer,
			header:  map[string]string{"x-amz-trailer": "x-amz-checksum-crc32", "x-amz-decoded-content-length": "4"}}, 400, "MalformedTrailerError"},
		{"chunks shorter than declared", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("4\r\ndata\r\n0\r\n\r\n"),
			payload: sigv4.StreamingUnsignedTrailer, header: map[string]string{"x-amz-decoded-content-length": "5"}}, 400, "IncompleteBody"},
		{"aws-chunked without decoded length", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("0\r\n\r\n"),
			payload: sigv4.StreamingUnsignedTrailer}, 411, "MissingContentLength"},
		{"garbled chunk framing", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("zz\r\ndata\r\n0\r\n\r\n"),
			payload: sigv4.StreamingUnsignedTrailer, header: map[string]string{"x-amz-decoded-content-length": "4"}}, 400, "InvalidRequest"},
		{"body not matching x-amz-content-sha256", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			payload: hexSHA256([]byte("other"))}, 400, "XAmzContentSHA256Mismatch"},
		{"forged signature", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			creds: aws.Credentials{AccessKeyID: s3AccessKey, SecretAccessKey: "guessed"}}, 403, "SignatureDoesNotMatch"},
		{"signature of another path", rawRequest{method: "PUT", path: "/bad/other", body: []byte("data"),
			after: func(r *http.Request) { r.URL.Path = "/bad/keep" }}, 403, "SignatureDoesNotMatch"},
		{"unknown access key", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			creds: aws.Credentials{AccessKeyID: "SFNOSUCHKEY000000000", SecretAccessKey: s3SecretKey}}, 403, "InvalidAccessKeyId"},
		{"unsigned", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"), unsigned: true}, 403, "AccessDenied"},
		{"unsigned GET", rawRequest{method: "GET", path: "/bad/keep", unsigned: true}, 403, "AccessDenied"},
		{"SigV2", rawRequest{method: "GET", path: "/bad/keep", unsigned: true,
			header: map[string]string{"Authorization": "AWS " + s3AccessKey + ":c2ln"}}, 400, "InvalidRequest"},
		{"signed 20 minutes ago", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			at: now.Add(-20 * time.Minute)}, 403, "RequestTimeTooSkewed"},
		{"signed 20 minutes ahead", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			at: now.Add(20 * time.Minute)}, 403, "RequestTimeTooSkewed"},
		{"wrong region", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"), after: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/us-east-1/", "/eu-west-1/", 1))
		}}, 400, "AuthorizationHeaderMalformed"},
		{"unsigned x-amz-meta header", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			after: func(r *http.Request) { r.Header.Set("x-amz-meta-injected", "1") }}, 403, "AccessDenied"},
		{"no x-amz-content-sha256", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			after: func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }}, 400, "MissingSecurityHeader"},
		{"oversized metadata", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-meta-a": strings.Repeat("v", 1500), "x-amz-meta-b": strings.Repeat("v", 600)}}, 400, "MetadataTooLarge"},
		{"key too long", rawRequest{method: "PUT", path: longKey, body: []byte("data")}, 400, "KeyTooLongError"},
		{"storage class unknown", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-storage-class": "COLD"}}, 400, "InvalidStorageClass"},
		{"server-side encryption", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-server-side-encryption": "AES256"}}, 501, "NotImplemented"},
		{"public ACL", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-acl": "public-read"}}, 501, "NotImplemented"},
		{"tagging header", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"x-amz-tagging": "a=b"}}, 501, "NotImplemented"},
		{"If-None-Match other than *", rawRequest{method: "PUT", path: "/bad/keep", body: []byte("data"),
			header: map[string]string{"If-None-Match": `"abc"`}}, 501, "NotImplemented"},
		{"PUT ?tagging", rawRequest{method: "PUT", path: "/bad/keep?tagging",
			body: []byte("<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>")}, 501, "NotImplemented"},
		{"PUT ?acl", rawRequest{method: "PUT", path: "/bad/keep?acl", body: []byte("data")}, 501, "NotImplemented"},
		{"PUT ?retention", rawRequest{method: "PUT", path: "/bad/keep?retention", body: []byte("data")}, 501, "NotImplemented"},
		{"PUT with an unknown parameter", rawRequest{method: "PUT", path: "/bad/keep?frobnicate=1", body: []byte("data")}, 501, "NotImplemented"},
		{"DELETE ?tagging", rawRequest{method: "DELETE", path: "/bad/keep?tagging"}, 501, "NotImplemented"},
		{"DELETE with an unknown parameter", rawRequest{method: "DELETE", path: "/bad/keep?force=1"}, 501, "NotImplemented"},
		{"POST object", rawRequest{method: "POST", path: "/bad/keep", body: []byte("data")}, 501, "NotImplemented"},
		{"POST ?restore", rawRequest{method: "POST", path: "/bad/keep?restore"}, 501, "NotImplemented"},
		{"GET ?acl", rawRequest{method: "GET", path: "/bad/keep?acl"}, 501, "NotImplemented"},
		{"GET ?torrent", rawRequest{method: "GET", path: "/bad/keep?torrent"}, 501, "NotImplemented"},
		{"GET ?attributes without the attributes header", rawRequest{method: "GET", path: "/bad/keep?attributes"}, 400, "InvalidArgument"},
		{"GET ?attributes of an unknown attribute", rawRequest{method: "GET", path: "/bad/keep?attributes",
			header: map[string]string{"x-amz-object-attributes": "ETag,Colour"}}, 400, "InvalidArgument"},
		{"PUT bucket ?replication", rawRequest{method: "PUT", path: "/bad?replication", body: []byte("<ReplicationConfiguration/>")}, 501, "NotImplemented"},
		{"PUT bucket ?policy", rawRequest{method: "PUT", path: "/bad?policy", body: []byte("{}")}, 501, "NotImplemented"},
		{"DELETE bucket ?cors", rawRequest{method: "DELETE", path: "/bad?cors"}, 501, "NotImplemented"},
		{"object lock bucket", rawRequest{method: "PUT", path: "/locked",
			header: map[string]string{"x-amz-bucket-object-lock-enabled": "true"}}, 501, "NotImplemented"},
		{"PATCH", rawRequest{method: "PATCH", path: "/bad/keep", body: []byte("data")}, 405, "MethodNotAllowed"},
		{"DeleteBucket not empty", rawRequest{method: "DELETE", path: "/bad"}, 409, "BucketNotEmpty"},
		{"negative max-keys", rawRequest{method: "GET", path: "/bad?list-type=2&max-keys=-1"}, 400, "InvalidArgument"},
		{"bad continuation token", rawRequest{method: "GET", path: "/bad?list-type=2&continuation-token=%25%25"}, 400, "InvalidArgument"},
		{"bad encoding-type", rawRequest{method: "GET", path: "/bad?encoding-type=base64"}, 400, "InvalidArgument"},
		{"version-id-marker without key-marker", rawRequest{method: "GET", path: "/bad?versions&version-id-marker=null"}, 400, "InvalidArgument"},
		{"empty versionId", rawRequest{method: "GET", path: "/bad/keep?versionId="}, 400, "InvalidArgument"},
		{"missing bucket", rawRequest{method: "GET", path: "/nosuchbucket/keep"}, 404, "NoSuchBucket"},
		{"bad copy source", rawRequest{method: "PUT", path: "/bad/copy", header: map[string]string{"x-amz-copy-source": "nokey"}}, 400, "InvalidArgument"},
		{"bad metadata directive", rawRequest{method: "PUT", path: "/bad/copy",
			header: map[string]string{"x-amz-copy-source": "bad/keep", "x-amz-metadata-directive": "MERGE"}}, 400, "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkError(t, s.send(t, s.build(t, tt.req)), tt.status, tt.code)
			if got := s.snapshot(t, "bad"); got != before {
				t.Fatalf("stored something:\n got %s\nwant %s", got, before)
			}
			for _, b := range []string{"newbucket", "locked"} {
				if _, err := s.svc.Bucket(context.Background(), b); err == nil {
					t.Fatalf("bucket %s created", b)
				}
			}
		})
	}

	t.Run("expired presigned PUT", func(t *testing.T) {
		u := s.presign(t, "PUT", "/bad/keep", now.Add(-2*time.Hour), time.Hour)
		r, _ := http.NewRequest("PUT", u, strings.NewReader("data"))
		checkError(t, s.send(t, r), 403, "AccessDenied")
		eq(t, "snapshot", s.snapshot(t, "bad"), before)
	})
	t.Run("presigned URL with a changed parameter", func(t *testing.T) {
		u := s.presign(t, "GET", "/bad/keep", now, time.Hour)
		r, _ := http.NewRequest("GET", strings.Replace(u, "X-Amz-Expires=3600", "X-Amz-Expires=3601", 1), nil)
		checkError(t, s.send(t, r), 403, "SignatureDoesNotMatch")
	})
	t.Run("tampered signed chunk", func(t *testing.T) {
		r := s.build(t, rawRequest{method: "PUT", path: "/bad/keep", payload: sigv4.StreamingPayload,
			header: map[string]string{"x-amz-decoded-content-length": "10"}})
		body := chunkedSigned(t, r, []byte("0123456789"), 4, timeOfRequest(t, r))
		body[bytes.Index(body, []byte("4567"))] = 'X'
		setBody(r, body)
		checkError(t, s.send(t, r), 403, "SignatureDoesNotMatch")
		eq(t, "snapshot", s.snapshot(t, "bad"), before)
	})
	t.Run("truncated body", func(t *testing.T) {
		resp := s.sendTruncated(t, rawRequest{method: "PUT", path: "/bad/keep", body: bytes.Repeat([]byte("x"), 100),
			payload: sigv4.UnsignedPayload}, 50)
		checkError(t, resp, 400, "IncompleteBody")
		eq(t, "snapshot", s.snapshot(t, "bad"), before)
	})
	t.Run("HEAD errors have no body", func(t *testing.T) {
		resp := s.send(t, s.build(t, rawRequest{method: "HEAD", path: "/bad/missing"}))
		if resp.status != 404 || len(resp.body) != 0 || len(resp.header.Get("x-amz-request-id")) != 16 {
			t.Fatalf("HEAD of a missing key: %d, %q, id %q", resp.status, resp.body, resp.header.Get("x-amz-request-id"))
		}
	})
}

// awss3PutInput shortens the option type of s3Test.put.
type awss3PutInput = awss3.PutObjectInput

// presign returns a presigned URL for method and path, signed at `at`
// and valid for d.
func (s *s3Server) presign(t *testing.T, method, path string, at time.Time, d time.Duration) string {
	t.Helper()
	r, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := r.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(int(d/time.Second)))
	r.URL.RawQuery = q.Encode()
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), rootCreds, r, sigv4.UnsignedPayload, "s3", "us-east-1", at,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func timeOfRequest(t *testing.T, r *http.Request) time.Time {
	t.Helper()
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func setBody(r *http.Request, body []byte) {
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
}

// sendTruncated sends a request whose body stops after n of its
// Content-Length bytes, half-closes the connection and reads the answer.
func (s *s3Server) sendTruncated(t *testing.T, rr rawRequest, n int) rawResponse {
	t.Helper()
	r := s.build(t, rr)
	var wire bytes.Buffer
	if err := r.Write(&wire); err != nil {
		t.Fatal(err)
	}
	head := bytes.Index(wire.Bytes(), []byte("\r\n\r\n")) + 4
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(wire.Bytes()[:head+n]); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return rawResponse{resp.StatusCode, resp.Header, body}
}

// signedTrailer appends the trailer of a STREAMING-AWS4-HMAC-SHA256-
// PAYLOAD-TRAILER body to a signed chunked body (whose last chunk is the
// empty one): the trailing header and its signature, computed here from
// the published algorithm, since the SDK has no signer for it.
func signedTrailer(body []byte, trailer string, at time.Time) []byte {
	last := body[bytes.LastIndex(body, []byte("chunk-signature="))+16:]
	prev := string(last[:64])
	body = body[:len(body)-2] // the empty chunk's CRLF: the trailer comes first
	mac := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	date := at.UTC().Format("20060102")
	key := mac(mac(mac(mac([]byte("AWS4"+s3SecretKey), date), "us-east-1"), "s3"), "aws4_request")
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + at.UTC().Format("20060102T150405Z") + "\n" + date + "/us-east-1/s3/aws4_request\n" +
		prev + "\n" + hexSHA256([]byte(trailer+"\n"))
	return fmt.Appendf(body, "%s\r\nx-amz-trailer-signature:%x\r\n\r\n", trailer, mac(key, sts))
}

func TestS3SignedStreaming(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("stream")
	data := randomBytes(3*s3Chunk+77, 4)

	r := s.build(t, rawRequest{method: "PUT", path: "/stream/plain", payload: sigv4.StreamingPayload,
		header: map[string]string{"x-amz-decoded-content-length": strconv.Itoa(len(data)), "Content-Encoding": "aws-chunked"}})
	setBody(r, chunkedSigned(t, r, data, 8192, timeOfRequest(t, r)))
	resp := s.send(t, r)
	eq(t, "signed chunks PUT", resp.status, 200)
	eq(t, "ETag", resp.header.Get("ETag"), `"`+md5hex(data)+`"`)
	out, got := c.get("stream", "plain", "")
	if !bytes.Equal(got, data) {
		t.Fatal("signed chunked body stored wrong")
	}
	eq(t, "aws-chunked not stored as Content-Encoding", aws.ToString(out.ContentEncoding), "")

	r = s.build(t, rawRequest{method: "PUT", path: "/stream/trailer", payload: sigv4.StreamingPayloadTrailer,
		header: map[string]string{"x-amz-decoded-content-length": strconv.Itoa(len(data)),
			"Content-Encoding": "aws-chunked,gzip", "x-amz-trailer": "x-amz-checksum-crc32"}})
	at := timeOfRequest(t, r)
	trailer := "x-amz-checksum-crc32:" + crc32b64(data)
	setBody(r, signedTrailer(chunkedSigned(t, r, data, 50000, at), trailer, at))
	resp = s.send(t, r)
	eq(t, "signed trailer PUT", resp.status, 200)
	eq(t, "echoed checksum", resp.header.Get("x-amz-checksum-crc32"), crc32b64(data))
	out = must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("stream"), Key: aws.String("trailer"),
		ChecksumMode: "ENABLED"}))
	got = must(io.ReadAll(out.Body))
	out.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("signed trailer body stored wrong")
	}
	eq(t, "stored checksum", aws.ToString(out.ChecksumCRC32), crc32b64(data))
	eq(t, "Content-Encoding without aws-chunked", aws.ToString(out.ContentEncoding), "gzip")

	// The same body with the trailer's value changed fails its signature.
	r = s.build(t, rawRequest{method: "PUT", path: "/stream/forged", payload: sigv4.StreamingPayloadTrailer,
		header: map[string]string{"x-amz-decoded-content-length": strconv.Itoa(len(data)), "x-amz-trailer": "x-amz-checksum-crc32"}})
	at = timeOfRequest(t, r)
	body := signedTrailer(chunkedSigned(t, r, data, 50000, at), trailer, at)
	setBody(r, bytes.Replace(body, []byte(crc32b64(data)), []byte(crc32b64([]byte("x"))), 1))
	checkError(t, s.send(t, r), 403, "SignatureDoesNotMatch")
	wantErr(t, c.getErr("stream", "forged", ""), 404, "NoSuchKey")
}

func TestS3Presigned(t *testing.T) {
	s := startS3(t, true)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(false)}
	defer recoverMust(t)
	c.createBucket("pre")

	// The SDK's presign client, virtual-host style, over TLS.
	pc := awss3.NewPresignClient(c.c, awss3.WithPresignExpires(10*time.Minute))
	put := must(pc.PresignPutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("pre"), Key: aws.String("a key")}))
	r, err := http.NewRequest(put.Method, put.URL, strings.NewReader("presigned body"))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range put.SignedHeader {
		if k != "Host" {
			r.Header[k] = vs
		}
	}
	resp := s.send(t, r)
	eq(t, "presigned PUT", resp.status, 200)
	get := must(pc.PresignGetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("pre"), Key: aws.String("a key")}))
	r, _ = http.NewRequest(get.Method, get.URL, nil)
	resp = s.send(t, r)
	eq(t, "presigned GET", resp.status, 200)
	eq(t, "presigned GET body", string(resp.body), "presigned body")
	r, _ = http.NewRequest("GET", strings.Replace(get.URL, "a%20key", "other", 1), nil)
	checkError(t, s.send(t, r), 403, "SignatureDoesNotMatch")
}

func TestS3ListingWire(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("wire")
	for _, k := range []string{"a b/c+d", "a b/e&f", "x\x01y", "z"} {
		c.put("wire", k, []byte("1"))
	}
	list := func(query string) string {
		resp := s.send(t, s.build(t, rawRequest{method: "GET", path: "/wire?" + query}))
		eq(t, query, resp.status, 200)
		if len(resp.header.Get("x-amz-request-id")) != 16 {
			t.Fatalf("%s: no request id", query)
		}
		return string(resp.body)
	}
	contains := func(doc string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(doc, p) {
				t.Fatalf("listing lacks %s:\n%s", p, doc)
			}
		}
	}
	doc := list("list-type=2&encoding-type=url&delimiter=%2F&max-keys=2")
	contains(doc, "<EncodingType>url</EncodingType>", "<Prefix>a%20b/</Prefix>", "<Key>x%01y</Key>",
		"<KeyCount>2</KeyCount>", "<IsTruncated>true</IsTruncated>", "<Delimiter>/</Delimiter>", "<NextContinuationToken>")
	doc = list("encoding-type=url&prefix=a%20b%2F")
	contains(doc, "<Key>a%20b/c%2Bd</Key>", "<Key>a%20b/e%26f</Key>", "<Marker></Marker>", "<Prefix>a%20b/</Prefix>")
	doc = list("delimiter=%2F&max-keys=1")
	contains(doc, "<NextMarker>a b/</NextMarker>", "<IsTruncated>true</IsTruncated>")
	doc = list("versions&encoding-type=url&max-keys=1")
	contains(doc, "<ListVersionsResult", "<NextKeyMarker>a%20b/c%2Bd</NextKeyMarker>", "<NextVersionIdMarker>null</NextVersionIdMarker>")
	doc = list("list-type=2&max-keys=0")
	contains(doc, "<KeyCount>0</KeyCount>", "<IsTruncated>false</IsTruncated>")
}

func TestS3Checksums(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("sums")
	// Check values of "123456789" from the CRC catalogue, and its SHAs.
	sums := map[string]string{
		"crc32":     "cbf43926",
		"crc32c":    "e3069283",
		"crc64nvme": "ae8b14860a799888",
		"sha1":      "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
		"sha256":    "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
	}
	body := []byte("123456789")
	for alg, hexSum := range sums {
		sum, _ := hex.DecodeString(hexSum)
		header := "x-amz-checksum-" + alg
		value := base64.StdEncoding.EncodeToString(sum)
		resp := s.send(t, s.build(t, rawRequest{method: "PUT", path: "/sums/" + alg, body: body,
			header: map[string]string{header: value, "x-amz-sdk-checksum-algorithm": strings.ToUpper(alg)}}))
		eq(t, alg+" PUT", resp.status, 200)
		eq(t, alg+" echoed", resp.header.Get(header), value)

		resp = s.send(t, s.build(t, rawRequest{method: "HEAD", path: "/sums/" + alg,
			header: map[string]string{"x-amz-checksum-mode": "ENABLED"}}))
		eq(t, alg+" HEAD with checksum mode", resp.header.Get(header), value)
		eq(t, alg+" checksum type", resp.header.Get("x-amz-checksum-type"), "FULL_OBJECT")
		resp = s.send(t, s.build(t, rawRequest{method: "GET", path: "/sums/" + alg}))
		eq(t, alg+" GET without checksum mode", resp.header.Get(header), "")
		resp = s.send(t, s.build(t, rawRequest{method: "GET", path: "/sums/" + alg,
			header: map[string]string{"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-3"}}))
		eq(t, alg+" ranged GET", resp.status, 206)
		eq(t, alg+" ranged GET checksum", resp.header.Get(header), "")

		resp = s.send(t, s.build(t, rawRequest{method: "PUT", path: "/sums/" + alg + "-bad", body: []byte("123456780"),
			header: map[string]string{header: value}}))
		checkError(t, resp, 400, "BadDigest")
		wantErr(t, c.getErr("sums", alg+"-bad", ""), 404, "NoSuchKey")
	}
}
