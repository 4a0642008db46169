package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// The S3 tests run the real handler over the real embedded stores (bolt
// meta, local chunks) on a loopback listener and drive it with the AWS
// SDK for Go v2 at its default settings, and with raw signed requests
// where the SDK would refuse to send something wrong.

const (
	s3AccessKey = "SFTESTROOT0000000001"
	s3SecretKey = "test/secret+0123456789abcdefghijklmnopqrs"
	// A second key: an owner of its own, not the root.
	s3AliceKey    = "SFTESTALICE000000001"
	s3AliceSecret = "alice/secret+0123456789abcdefghijklmnopq"
	// s3Domain is the endpoint's host name: httptest's certificate is
	// valid for it and its subdomains, and every connection is dialled to
	// the loopback listener whatever the name, so nothing is resolved.
	s3Domain = "example.com"
	// s3Chunk is the chunk size of the store under test: small, so that
	// ranges and bodies cross chunk boundaries.
	s3Chunk = 64 << 10
)

// s3Server is a running endpoint.
type s3Server struct {
	url  string // scheme://example.com:PORT
	addr string // the loopback listener
	svc  *object.Service
	tr   *http.Transport // dials the listener, trusts its certificate

	mu    sync.Mutex
	modes map[string]int // x-amz-content-sha256 of the PutObjects received
	vhost int            // requests addressed virtual-host style
}

// startS3 starts an endpoint over fresh stores; opts change its Config.
func startS3(t *testing.T, useTLS bool, opts ...func(*s3.Config)) *s3Server {
	t.Helper()
	dir := t.TempDir()
	m, err := bolt.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.Open(dir, local.Options{})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	s := &s3Server{svc: object.New(m, d, object.Options{ChunkSize: s3Chunk}), modes: map[string]int{}}
	cfg := s3.Config{
		Domains:       []string{s3Domain},
		Keys:          sigv4.StaticKeys{s3AccessKey: s3SecretKey, s3AliceKey: s3AliceSecret},
		RootAccessKey: s3AccessKey,
		Logger:        slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	h := s3.New(s.svc, cfg)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if isPutObject(r) {
			s.modes[r.Header.Get("X-Amz-Content-Sha256")]++
		}
		if host, _, _ := net.SplitHostPort(r.Host); strings.HasSuffix(host, "."+s3Domain) {
			s.vhost++
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	scheme := "http"
	if useTLS {
		ts.StartTLS()
		scheme = "https"
	} else {
		ts.Start()
	}
	t.Cleanup(func() {
		ts.Close()
		d.Close()
		m.Close()
	})
	s.addr = ts.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(s.addr)
	s.url = scheme + "://" + s3Domain + ":" + port
	s.tr = ts.Client().Transport.(*http.Transport).Clone()
	s.tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
	}
	return s
}

// isPutObject tells a PutObject with a body and the default checksum
// from the other PUTs.
func isPutObject(r *http.Request) bool {
	if alg := r.Header.Get("X-Amz-Sdk-Checksum-Algorithm"); alg != "" && alg != "CRC32" {
		return false
	}
	path := strings.Trim(r.URL.Path, "/")
	host, _, _ := net.SplitHostPort(r.Host)
	object := strings.Contains(path, "/") || path != "" && host != s3Domain
	return r.Method == http.MethodPut && r.URL.RawQuery == "x-id=PutObject" && object &&
		r.Header.Get("X-Amz-Copy-Source") == "" && r.ContentLength != 0
}

// client returns an SDK client with the SDK's default settings, changed
// only by opts. It is built from options, not from the environment, so
// that no AWS_* variable of the machine running the tests changes them;
// the checksum settings are therefore set to the defaults that
// config.LoadDefaultConfig resolves (an Options left unset sends none).
func (s *s3Server) client(pathStyle bool, opts ...func(*awss3.Options)) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, ""),
		HTTPClient:                 &http.Client{Transport: s.tr},
		BaseEndpoint:               aws.String(s.url),
		UsePathStyle:               pathStyle,
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}, opts...)
}

// seen returns the payload modes of the PutObjects received so far and
// how many requests came virtual-host style.
func (s *s3Server) seen() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.modes), s.vhost
}

// apiErr is what an SDK call failed with: the HTTP status, the S3 error
// code and the response headers.
type apiErr struct {
	status int
	code   string
	header http.Header
}

func errOf(t *testing.T, err error) apiErr {
	t.Helper()
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	var e apiErr
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.status, e.header = re.HTTPStatusCode(), re.Response.Header
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.code = ae.ErrorCode()
	}
	return e
}

// wantErr checks that err is the S3 error (status, code).
func wantErr(t *testing.T, err error, status int, code string) apiErr {
	t.Helper()
	e := errOf(t, err)
	if e.status != status || e.code != code {
		t.Fatalf("got error %d %s (%v), want %d %s", e.status, e.code, err, status, code)
	}
	return e
}

// mustFailure is how must reports a failed call to recoverMust.
type mustFailure struct {
	where string
	err   error
}

// must returns v, or ends the test when err is set: it panics, and
// recoverMust, deferred by the test, turns that into t.Fatal. (A plain
// helper cannot take both t and a call's two results.)
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(mustFailure{fmt.Sprintf("%s:%d", filepath.Base(file), line), err})
	}
	return v
}

func recoverMust(t *testing.T) {
	if r := recover(); r != nil {
		f, ok := r.(mustFailure)
		if !ok {
			panic(r)
		}
		t.Fatalf("%s: %v", f.where, f.err)
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func crc32b64(b []byte) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc32.ChecksumIEEE(b))
	return base64.StdEncoding.EncodeToString(s[:])
}

// crc32cb64 is the CRC32C of b as S3 sends it (x-amz-checksum-crc32c).
func crc32cb64(b []byte) string {
	s := binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(s)
}

// mountWritten fails t unless v looks as a file written through the
// mount must: an opaque ETag (a '-' in it) and the CRC32C of body.
func mountWritten(t *testing.T, what string, v *meta.Version, body []byte) {
	t.Helper()
	if !strings.Contains(v.ETag, "-") || v.Checksums["CRC32C"] != crc32cb64(body) || len(v.Checksums) != 1 {
		t.Errorf("%s: ETag %s, checksums %v; want an opaque ETag and CRC32C %s only", what, v.ETag, v.Checksums, crc32cb64(body))
	}
}

func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// s3Test is a client bound to a context and test, with short helpers for
// the calls the scenarios repeat.
type s3Test struct {
	t   *testing.T
	ctx context.Context
	c   *awss3.Client
}

func (c s3Test) put(bucket, key string, body []byte, opts ...func(*awss3.PutObjectInput)) *awss3.PutObjectOutput {
	c.t.Helper()
	in := &awss3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)}
	for _, o := range opts {
		o(in)
	}
	return must(c.c.PutObject(c.ctx, in))
}

// get reads a whole object (a version, when versionID is set).
func (c s3Test) get(bucket, key, versionID string) (*awss3.GetObjectOutput, []byte) {
	c.t.Helper()
	in := &awss3.GetObjectInput{Bucket: &bucket, Key: &key}
	if versionID != "" {
		in.VersionId = &versionID
	}
	out := must(c.c.GetObject(c.ctx, in))
	defer out.Body.Close()
	return out, must(io.ReadAll(out.Body))
}

func (c s3Test) getErr(bucket, key, versionID string) error {
	in := &awss3.GetObjectInput{Bucket: &bucket, Key: &key}
	if versionID != "" {
		in.VersionId = &versionID
	}
	out, err := c.c.GetObject(c.ctx, in)
	if err == nil {
		out.Body.Close()
	}
	return err
}

func (c s3Test) del(bucket, key, versionID string) *awss3.DeleteObjectOutput {
	c.t.Helper()
	in := &awss3.DeleteObjectInput{Bucket: &bucket, Key: &key}
	if versionID != "" {
		in.VersionId = &versionID
	}
	return must(c.c.DeleteObject(c.ctx, in))
}

func (c s3Test) versioning(bucket string, status s3types.BucketVersioningStatus) {
	c.t.Helper()
	must(c.c.PutBucketVersioning(c.ctx, &awss3.PutBucketVersioningInput{
		Bucket:                  &bucket,
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: status},
	}))
}

func (c s3Test) createBucket(bucket string) {
	c.t.Helper()
	must(c.c.CreateBucket(c.ctx, &awss3.CreateBucketInput{Bucket: &bucket}))
}

// versions lists every row of a bucket as "key@version[:marker][*latest]",
// paging with the SDK's paginator at page size n.
func (c s3Test) versions(bucket string, n int32) []string {
	c.t.Helper()
	var rows []string
	p := awss3.NewListObjectVersionsPaginator(c.c, &awss3.ListObjectVersionsInput{Bucket: &bucket, MaxKeys: &n})
	for p.HasMorePages() {
		page := must(p.NextPage(c.ctx))
		// The SDK separates versions and markers; merge them back into
		// row order: by key, then newest first.
		type row struct {
			key, s string
			t      time.Time
		}
		var rs []row
		for _, v := range page.Versions {
			s := *v.Key + "@" + *v.VersionId
			if *v.IsLatest {
				s += "*"
			}
			rs = append(rs, row{*v.Key, s, *v.LastModified})
		}
		for _, m := range page.DeleteMarkers {
			s := *m.Key + "@" + *m.VersionId + ":marker"
			if *m.IsLatest {
				s += "*"
			}
			rs = append(rs, row{*m.Key, s, *m.LastModified})
		}
		slices.SortStableFunc(rs, func(a, b row) int {
			if c := strings.Compare(a.key, b.key); c != 0 {
				return c
			}
			return b.t.Compare(a.t)
		})
		if len(rs) > int(n) {
			c.t.Fatalf("page of %d rows, max %d", len(rs), n)
		}
		for _, r := range rs {
			rows = append(rows, r.s)
		}
	}
	return rows
}

// keys lists a bucket's live keys with ListObjectsV2 at page size n.
func (c s3Test) keys(bucket, prefix string, n int32) []string {
	c.t.Helper()
	var keys []string
	p := awss3.NewListObjectsV2Paginator(c.c, &awss3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: &n})
	for p.HasMorePages() {
		page := must(p.NextPage(c.ctx))
		if int(*page.KeyCount) != len(page.Contents) || *page.KeyCount > n {
			c.t.Fatalf("KeyCount %d with %d entries, max %d", *page.KeyCount, len(page.Contents), n)
		}
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
	}
	return keys
}

// s3Configs are the client setups every SDK scenario runs under: TLS with
// the SDK's defaults (aws-chunked bodies with a trailing CRC32), plain
// HTTP (the SDK then signs the payload's SHA-256 and sends the CRC32 as a
// header), and TLS with checksums off (UNSIGNED-PAYLOAD); both
// addressing styles.
var s3Configs = []struct {
	name      string
	tls       bool
	pathStyle bool
	opts      []func(*awss3.Options)
	// mode is the x-amz-content-sha256 every PutObject must arrive with.
	mode string
}{
	{name: "tls-vhost-defaults", tls: true, mode: sigv4.StreamingUnsignedTrailer},
	{name: "http-path-defaults", pathStyle: true, mode: "sha256"},
	{name: "tls-path-no-checksums", tls: true, pathStyle: true, mode: sigv4.UnsignedPayload,
		opts: []func(*awss3.Options){func(o *awss3.Options) {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}}},
}

// forEachConfig runs fn under every client setup, each against its own
// server, and checks afterwards that PutObject bodies arrived in the
// setup's payload mode.
func forEachConfig(t *testing.T, fn func(t *testing.T, c s3Test, checksums bool)) {
	for _, cfg := range s3Configs {
		t.Run(cfg.name, func(t *testing.T) {
			srv := startS3(t, cfg.tls)
			c := s3Test{t: t, ctx: context.Background(), c: srv.client(cfg.pathStyle, cfg.opts...)}
			func() {
				defer recoverMust(t)
				fn(t, c, cfg.opts == nil)
			}()
			modes, vhost := srv.seen()
			for mode, n := range modes {
				if mode == "" || strings.HasPrefix(mode, "STREAMING-") || mode == sigv4.UnsignedPayload {
					if mode != cfg.mode {
						t.Errorf("%d PUTs in mode %q, want all in %q", n, mode, cfg.mode)
					}
				} else if cfg.mode != "sha256" {
					t.Errorf("%d PUTs with a literal payload hash, want %q", n, cfg.mode)
				}
			}
			if len(modes) == 0 || (vhost > 0) == cfg.pathStyle {
				t.Errorf("%d PutObjects seen, %d requests virtual-host style; path style %v", len(modes), vhost, cfg.pathStyle)
			}
		})
	}
}

func TestS3Buckets(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("alpha")
		_, err := c.c.CreateBucket(c.ctx, &awss3.CreateBucketInput{Bucket: aws.String("alpha")})
		wantErr(t, err, 409, "BucketAlreadyOwnedByYou")
		must(c.c.CreateBucket(c.ctx, &awss3.CreateBucketInput{
			Bucket:                    aws.String("beta"),
			CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "us-east-1"},
		}))
		_, err = c.c.CreateBucket(c.ctx, &awss3.CreateBucketInput{
			Bucket:                    aws.String("gamma"),
			CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-west-1"},
		})
		wantErr(t, err, 400, "IllegalLocationConstraintException")
		_, err = c.c.CreateBucket(c.ctx, &awss3.CreateBucketInput{Bucket: aws.String("no_underscores")})
		wantErr(t, err, 400, "InvalidBucketName")

		lb := must(c.c.ListBuckets(c.ctx, &awss3.ListBucketsInput{}))
		var names []string
		for _, b := range lb.Buckets {
			names = append(names, *b.Name)
			if b.CreationDate == nil || time.Since(*b.CreationDate) > time.Minute {
				t.Errorf("bucket %s created %v", *b.Name, b.CreationDate)
			}
		}
		eq(t, "buckets", strings.Join(names, ","), "alpha,beta")
		eq(t, "owner", *lb.Owner.DisplayName, "root")
		eq(t, "owner id length", len(*lb.Owner.ID), 64)

		names = nil
		bp := awss3.NewListBucketsPaginator(c.c, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
		for bp.HasMorePages() {
			page := must(bp.NextPage(c.ctx))
			eq(t, "buckets per page", len(page.Buckets), 1)
			names = append(names, *page.Buckets[0].Name)
		}
		eq(t, "paged buckets", strings.Join(names, ","), "alpha,beta")
		lb = must(c.c.ListBuckets(c.ctx, &awss3.ListBucketsInput{Prefix: aws.String("b")}))
		eq(t, "buckets under b", len(lb.Buckets), 1)
		eq(t, "bucket under b", *lb.Buckets[0].Name, "beta")

		must(c.c.HeadBucket(c.ctx, &awss3.HeadBucketInput{Bucket: aws.String("alpha")}))
		_, err = c.c.HeadBucket(c.ctx, &awss3.HeadBucketInput{Bucket: aws.String("nope")})
		eq(t, "HeadBucket of a missing bucket", errOf(t, err).status, 404)
		loc := must(c.c.GetBucketLocation(c.ctx, &awss3.GetBucketLocationInput{Bucket: aws.String("alpha")}))
		eq(t, "location", loc.LocationConstraint, "")

		gv := must(c.c.GetBucketVersioning(c.ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("alpha")}))
		eq(t, "new bucket versioning", gv.Status, "")
		c.versioning("alpha", s3types.BucketVersioningStatusEnabled)
		gv = must(c.c.GetBucketVersioning(c.ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("alpha")}))
		eq(t, "versioning", gv.Status, s3types.BucketVersioningStatusEnabled)
		c.versioning("alpha", s3types.BucketVersioningStatusSuspended)
		gv = must(c.c.GetBucketVersioning(c.ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("alpha")}))
		eq(t, "versioning", gv.Status, s3types.BucketVersioningStatusSuspended)

		// A bucket goes only when no version and no delete marker remain.
		c.versioning("beta", s3types.BucketVersioningStatusEnabled)
		c.put("beta", "k", []byte("x"))
		c.del("beta", "k", "")
		_, err = c.c.DeleteBucket(c.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("beta")})
		wantErr(t, err, 409, "BucketNotEmpty")
		for _, row := range c.versions("beta", 1000) {
			key, id, _ := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(row, "*"), ":marker"), "@")
			c.del("beta", key, id)
		}
		must(c.c.DeleteBucket(c.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("beta")}))
		_, err = c.c.DeleteBucket(c.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("beta")})
		wantErr(t, err, 404, "NoSuchBucket")
		_, err = c.c.ListObjectsV2(c.ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("beta")})
		wantErr(t, err, 404, "NoSuchBucket")
	})
}

func TestS3ObjectsUnversioned(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, checksums bool) {
		c.createBucket("plain")
		body := randomBytes(3*s3Chunk+123, 1)
		put := c.put("plain", "dir/obj ünï+&=.bin", body, func(in *awss3.PutObjectInput) {
			in.ContentType = aws.String("application/x-test")
			in.ContentDisposition = aws.String(`attachment; filename="x.bin"`)
			in.CacheControl = aws.String("max-age=60")
			in.ContentLanguage = aws.String("en")
			in.Metadata = map[string]string{"color": "blue", "Mixed-Case": "Value"}
		})
		eq(t, "ETag", *put.ETag, `"`+md5hex(body)+`"`)
		if put.VersionId != nil {
			t.Errorf("unversioned PUT returned version id %q", *put.VersionId)
		}
		out, got := c.get("plain", "dir/obj ünï+&=.bin", "")
		if !bytes.Equal(got, body) {
			t.Fatalf("GET returned %d bytes differing from the %d put", len(got), len(body))
		}
		eq(t, "Content-Type", *out.ContentType, "application/x-test")
		eq(t, "Content-Disposition", *out.ContentDisposition, `attachment; filename="x.bin"`)
		eq(t, "Cache-Control", *out.CacheControl, "max-age=60")
		eq(t, "Content-Language", *out.ContentLanguage, "en")
		eq(t, "metadata", fmt.Sprint(out.Metadata), "map[color:blue mixed-case:Value]")
		eq(t, "Content-Encoding stored", aws.ToString(out.ContentEncoding), "")
		eq(t, "ETag", *out.ETag, `"`+md5hex(body)+`"`)
		eq(t, "Content-Length", *out.ContentLength, int64(len(body)))
		if out.VersionId != nil {
			t.Errorf("unversioned GET returned version id %q", *out.VersionId)
		}
		if checksums {
			eq(t, "stored CRC32 (sent by the SDK)", aws.ToString(out.ChecksumCRC32), crc32b64(body))
		} else if out.ChecksumCRC32 != nil {
			t.Errorf("no checksum sent, got %q back", *out.ChecksumCRC32)
		}

		// x-amz-checksum-mode: ENABLED returns the stored sum; HEAD too.
		head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("plain"),
			Key: aws.String("dir/obj ünï+&=.bin"), ChecksumMode: s3types.ChecksumModeEnabled}))
		eq(t, "HEAD length", *head.ContentLength, int64(len(body)))
		if checksums {
			eq(t, "HEAD CRC32", aws.ToString(head.ChecksumCRC32), crc32b64(body))
		}

		// A checksum the client names explicitly is verified and stored.
		sha := c.put("plain", "sha", []byte("sha me"), func(in *awss3.PutObjectInput) {
			in.ChecksumAlgorithm = s3types.ChecksumAlgorithmSha256
		})
		if sha.ChecksumSHA256 == nil {
			t.Error("PUT with SHA256 checksum: no checksum echoed")
		}
		head = must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("plain"),
			Key: aws.String("sha"), ChecksumMode: s3types.ChecksumModeEnabled}))
		shaSum := sha256.Sum256([]byte("sha me"))
		eq(t, "stored SHA256", aws.ToString(head.ChecksumSHA256), base64.StdEncoding.EncodeToString(shaSum[:]))

		// Overwriting replaces the only (null) version.
		c.put("plain", "dir/obj ünï+&=.bin", []byte("second"))
		_, got = c.get("plain", "dir/obj ünï+&=.bin", "")
		eq(t, "after overwrite", string(got), "second")
		_, got = c.get("plain", "dir/obj ünï+&=.bin", "null")
		eq(t, "versionId=null", string(got), "second")
		eq(t, "versions", strings.Join(c.versions("plain", 1000), " "), "dir/obj ünï+&=.bin@null* sha@null*")

		// Empty objects.
		c.put("plain", "empty", nil)
		out, got = c.get("plain", "empty", "")
		eq(t, "empty body", len(got), 0)
		eq(t, "empty ETag", *out.ETag, `"d41d8cd98f00b204e9800998ecf8427e"`)

		// DELETE removes the null row: no marker, no version id.
		del := c.del("plain", "dir/obj ünï+&=.bin", "")
		if del.DeleteMarker != nil && *del.DeleteMarker || del.VersionId != nil {
			t.Errorf("unversioned DELETE: marker %v, version %v", del.DeleteMarker, del.VersionId)
		}
		wantErr(t, c.getErr("plain", "dir/obj ünï+&=.bin", ""), 404, "NoSuchKey")
		c.del("plain", "never-existed", "")
		eq(t, "versions after delete", strings.Join(c.versions("plain", 1000), " "), "empty@null* sha@null*")
		wantErr(t, c.getErr("nobucket", "k", ""), 404, "NoSuchBucket")

		// response-* overrides.
		ov := must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("plain"), Key: aws.String("sha"),
			ResponseContentType: aws.String("text/plain"), ResponseContentDisposition: aws.String("inline"),
			ResponseCacheControl: aws.String("no-cache")}))
		ov.Body.Close()
		eq(t, "overridden Content-Type", *ov.ContentType, "text/plain")
		eq(t, "overridden Content-Disposition", *ov.ContentDisposition, "inline")
		eq(t, "overridden Cache-Control", *ov.CacheControl, "no-cache")

		// Oversized metadata is refused.
		_, err := c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("big-meta"),
			Body: strings.NewReader("x"), Metadata: map[string]string{"m": strings.Repeat("v", 2048)}})
		wantErr(t, err, 400, "MetadataTooLarge")
		wantErr(t, c.getErr("plain", "big-meta", ""), 404, "NoSuchKey")
	})
}

func TestS3Versioning(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("ver")
		c.put("ver", "k", []byte("pre-versioning")) // the null version
		c.versioning("ver", s3types.BucketVersioningStatusEnabled)
		v1 := *c.put("ver", "k", []byte("one")).VersionId
		v2 := *c.put("ver", "k", []byte("two")).VersionId
		if len(v1) != 32 || len(v2) != 32 || v1 == v2 {
			t.Fatalf("version ids %q, %q", v1, v2)
		}
		out, got := c.get("ver", "k", "")
		eq(t, "latest", string(got), "two")
		eq(t, "latest version id", *out.VersionId, v2)
		out, got = c.get("ver", "k", v1)
		eq(t, "v1", string(got), "one")
		eq(t, "v1 version id", *out.VersionId, v1)
		out, got = c.get("ver", "k", "null")
		eq(t, "null version", string(got), "pre-versioning")
		eq(t, "null version id", *out.VersionId, "null")
		wantErr(t, c.getErr("ver", "k", "0123456789abcdef0123456789abcdef"), 404, "NoSuchVersion")
		wantErr(t, c.getErr("ver", "k", "not-a-version"), 400, "InvalidArgument")

		// DELETE writes a marker; GET then 404s showing it, and GET of the
		// marker by id is 405.
		del := c.del("ver", "k", "")
		if !aws.ToBool(del.DeleteMarker) || del.VersionId == nil {
			t.Fatalf("DELETE: marker %v, version %v", del.DeleteMarker, del.VersionId)
		}
		marker := *del.VersionId
		e := wantErr(t, c.getErr("ver", "k", ""), 404, "NoSuchKey")
		eq(t, "x-amz-delete-marker", e.header.Get("x-amz-delete-marker"), "true")
		eq(t, "x-amz-version-id of the marker", e.header.Get("x-amz-version-id"), marker)
		_, err := c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("ver"), Key: aws.String("k")})
		e = errOf(t, err)
		eq(t, "HEAD of deleted key", e.status, 404)
		eq(t, "HEAD x-amz-delete-marker", e.header.Get("x-amz-delete-marker"), "true")
		eq(t, "HEAD x-amz-version-id", e.header.Get("x-amz-version-id"), marker)
		e = wantErr(t, c.getErr("ver", "k", marker), 405, "MethodNotAllowed")
		eq(t, "405 x-amz-delete-marker", e.header.Get("x-amz-delete-marker"), "true")
		eq(t, "405 x-amz-version-id", e.header.Get("x-amz-version-id"), marker)
		eq(t, "versions", strings.Join(c.versions("ver", 1000), " "),
			"k@"+marker+":marker* k@"+v2+" k@"+v1+" k@null")
		eq(t, "live keys", len(c.keys("ver", "", 1000)), 0)

		// Deleting the marker undeletes; deleting v2 makes v1 the latest.
		del = c.del("ver", "k", marker)
		eq(t, "marker removal: x-amz-delete-marker", aws.ToBool(del.DeleteMarker), true)
		eq(t, "marker removal: version", aws.ToString(del.VersionId), marker)
		_, got = c.get("ver", "k", "")
		eq(t, "undeleted", string(got), "two")
		del = c.del("ver", "k", v2)
		eq(t, "version removal: marker", aws.ToBool(del.DeleteMarker), false)
		eq(t, "version removal: version", aws.ToString(del.VersionId), v2)
		_, got = c.get("ver", "k", "")
		eq(t, "after removing v2", string(got), "one")
		eq(t, "versions", strings.Join(c.versions("ver", 1000), " "), "k@"+v1+"* k@null")

		// Suspended: PUTs write the null version, replacing the old one;
		// versioned rows stay.
		c.versioning("ver", s3types.BucketVersioningStatusSuspended)
		put := c.put("ver", "k", []byte("suspended"))
		eq(t, "suspended PUT version id", aws.ToString(put.VersionId), "null")
		out, got = c.get("ver", "k", "")
		eq(t, "suspended latest", string(got), "suspended")
		eq(t, "suspended GET version id", aws.ToString(out.VersionId), "null")
		eq(t, "versions", strings.Join(c.versions("ver", 1000), " "), "k@null* k@"+v1)
		c.put("ver", "k", []byte("suspended again"))
		eq(t, "versions", strings.Join(c.versions("ver", 1000), " "), "k@null* k@"+v1)
		del = c.del("ver", "k", "")
		eq(t, "suspended DELETE marker", aws.ToBool(del.DeleteMarker), true)
		eq(t, "suspended DELETE version", aws.ToString(del.VersionId), "null")
		eq(t, "versions", strings.Join(c.versions("ver", 1000), " "), "k@null:marker* k@"+v1)
		wantErr(t, c.getErr("ver", "k", ""), 404, "NoSuchKey")
		c.del("ver", "k", "null")
		_, got = c.get("ver", "k", "")
		eq(t, "after removing the null marker", string(got), "one")

		// Re-enabled: a new version sorts above the null row.
		c.versioning("ver", s3types.BucketVersioningStatusEnabled)
		c.put("ver", "k2", []byte("a"))
		c.versioning("ver", s3types.BucketVersioningStatusSuspended)
		c.put("ver", "k2", []byte("b"))
		_, got = c.get("ver", "k2", "")
		eq(t, "null version written after a versioned one is the latest", string(got), "b")
	})
}

func TestS3RangesAndConditionals(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("rng")
		body := randomBytes(200_000, 2)
		etag := *c.put("rng", "obj", body).ETag
		rangeGet := func(r string) (*awss3.GetObjectOutput, []byte, error) {
			out, err := c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), Range: &r})
			if err != nil {
				return nil, nil, err
			}
			defer out.Body.Close()
			b, err := io.ReadAll(out.Body)
			return out, b, err
		}
		for _, tc := range []struct {
			rng        string
			start, end int // inclusive
		}{
			{"bytes=0-0", 0, 0},
			{"bytes=1000-70000", 1000, 70000},
			{"bytes=65535-65536", 65535, 65536},
			{"bytes=199000-", 199000, 199999},
			{"bytes=-100", 199900, 199999},
			{"bytes=150000-999999", 150000, 199999},
			{"bytes=-999999", 0, 199999},
		} {
			out, got, err := rangeGet(tc.rng)
			if err != nil {
				t.Fatalf("%s: %v", tc.rng, err)
			}
			if !bytes.Equal(got, body[tc.start:tc.end+1]) {
				t.Fatalf("%s: wrong bytes (%d)", tc.rng, len(got))
			}
			eq(t, tc.rng+" Content-Range", aws.ToString(out.ContentRange), fmt.Sprintf("bytes %d-%d/200000", tc.start, tc.end))
			eq(t, tc.rng+" Content-Length", aws.ToInt64(out.ContentLength), int64(tc.end-tc.start+1))
		}
		_, _, err := rangeGet("bytes=200000-")
		e := wantErr(t, err, 416, "InvalidRange")
		eq(t, "416 Content-Range", e.header.Get("Content-Range"), "bytes */200000")

		// Conditional GET and HEAD.
		past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		cond := func(in *awss3.GetObjectInput) error {
			in.Bucket, in.Key = aws.String("rng"), aws.String("obj")
			out, err := c.c.GetObject(c.ctx, in)
			if err == nil {
				out.Body.Close()
			}
			return err
		}
		noErr(t, cond(&awss3.GetObjectInput{IfMatch: &etag}))
		noErr(t, cond(&awss3.GetObjectInput{IfMatch: aws.String(`"x", ` + etag)}))
		wantErr(t, cond(&awss3.GetObjectInput{IfMatch: aws.String(`"0000"`)}), 412, "PreconditionFailed")
		eq(t, "If-None-Match", errOf(t, cond(&awss3.GetObjectInput{IfNoneMatch: &etag})).status, 304)
		noErr(t, cond(&awss3.GetObjectInput{IfNoneMatch: aws.String(`"0000"`)}))
		eq(t, "If-Modified-Since future", errOf(t, cond(&awss3.GetObjectInput{IfModifiedSince: &future})).status, 304)
		noErr(t, cond(&awss3.GetObjectInput{IfModifiedSince: &past}))
		wantErr(t, cond(&awss3.GetObjectInput{IfUnmodifiedSince: &past}), 412, "PreconditionFailed")
		noErr(t, cond(&awss3.GetObjectInput{IfUnmodifiedSince: &future}))
		// If-Match decides over If-Unmodified-Since, If-None-Match over
		// If-Modified-Since.
		noErr(t, cond(&awss3.GetObjectInput{IfMatch: &etag, IfUnmodifiedSince: &past}))
		noErr(t, cond(&awss3.GetObjectInput{IfNoneMatch: aws.String(`"0000"`), IfModifiedSince: &future}))
		_, err = c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfNoneMatch: &etag})
		eq(t, "HEAD If-None-Match", errOf(t, err).status, 304)

		// Conditional PUT, checked atomically at commit.
		_, err = c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"),
			Body: strings.NewReader("clobber"), IfNoneMatch: aws.String("*")})
		wantErr(t, err, 412, "PreconditionFailed")
		c.put("rng", "fresh", []byte("new"), func(in *awss3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
		_, err = c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"),
			Body: strings.NewReader("clobber"), IfMatch: aws.String(`"0000"`)})
		wantErr(t, err, 412, "PreconditionFailed")
		_, err = c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("rng"), Key: aws.String("missing"),
			Body: strings.NewReader("x"), IfMatch: &etag})
		wantErr(t, err, 404, "NoSuchKey")
		_, got := c.get("rng", "obj", "")
		if !bytes.Equal(got, body) {
			t.Fatal("a failed conditional PUT changed the object")
		}
		c.put("rng", "obj", []byte("replaced"), func(in *awss3.PutObjectInput) { in.IfMatch = &etag })
		_, got = c.get("rng", "obj", "")
		eq(t, "after If-Match PUT", string(got), "replaced")
	})
}

func TestS3Copy(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, checksums bool) {
		c.createBucket("src")
		c.createBucket("dst")
		c.versioning("src", s3types.BucketVersioningStatusEnabled)
		c.versioning("dst", s3types.BucketVersioningStatusEnabled)
		body := randomBytes(2*s3Chunk+5, 3)
		v1 := *c.put("src", "a b/orig+1", body, func(in *awss3.PutObjectInput) {
			in.ContentType = aws.String("image/png")
			in.Metadata = map[string]string{"k": "v"}
		}).VersionId
		c.put("src", "a b/orig+1", []byte("newer"))

		// COPY (the default) of an old version keeps its metadata.
		cp := must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy"),
			CopySource: aws.String("src/a%20b/orig%2B1?versionId=" + v1)}))
		eq(t, "copy ETag", *cp.CopyObjectResult.ETag, `"`+md5hex(body)+`"`)
		eq(t, "copy source version", aws.ToString(cp.CopySourceVersionId), v1)
		if cp.VersionId == nil || len(*cp.VersionId) != 32 {
			t.Fatalf("copy version id %v", cp.VersionId)
		}
		out, got := c.get("dst", "copy", "")
		if !bytes.Equal(got, body) {
			t.Fatal("copy has different bytes")
		}
		eq(t, "copied version", *out.VersionId, *cp.VersionId)
		eq(t, "copied Content-Type", *out.ContentType, "image/png")
		eq(t, "copied metadata", fmt.Sprint(out.Metadata), "map[k:v]")
		if checksums {
			eq(t, "copied checksum", aws.ToString(cp.CopyObjectResult.ChecksumCRC32), crc32b64(body))
		}

		// REPLACE takes the request's metadata; the bytes' checksum stays.
		must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy"),
			CopySource: aws.String("dst/copy"), MetadataDirective: s3types.MetadataDirectiveReplace,
			ContentType: aws.String("text/plain"), Metadata: map[string]string{"new": "1"}}))
		out, got = c.get("dst", "copy", "")
		if !bytes.Equal(got, body) {
			t.Fatal("REPLACE copy has different bytes")
		}
		eq(t, "replaced Content-Type", *out.ContentType, "text/plain")
		eq(t, "replaced metadata", fmt.Sprint(out.Metadata), "map[new:1]")
		if checksums {
			eq(t, "checksum after REPLACE", aws.ToString(out.ChecksumCRC32), crc32b64(body))
		}
		_, err := c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy"),
			CopySource: aws.String("dst/copy")})
		wantErr(t, err, 400, "InvalidRequest")

		// Copy-source conditionals.
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c2"),
			CopySource: aws.String("dst/copy"), CopySourceIfMatch: aws.String(`"0000"`)})
		wantErr(t, err, 412, "PreconditionFailed")
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c2"),
			CopySource: aws.String("dst/copy"), CopySourceIfNoneMatch: cp.CopyObjectResult.ETag})
		wantErr(t, err, 412, "PreconditionFailed")
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c2"),
			CopySource: aws.String("dst/copy"), CopySourceIfUnmodifiedSince: aws.Time(time.Now().Add(-time.Hour))})
		wantErr(t, err, 412, "PreconditionFailed")
		wantErr(t, c.getErr("dst", "c2", ""), 404, "NoSuchKey")
		must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c2"),
			CopySource: aws.String("dst/copy"), CopySourceIfMatch: cp.CopyObjectResult.ETag,
			CopySourceIfModifiedSince: aws.Time(time.Now().Add(-time.Hour))}))

		// Copying a deleted key, or a delete marker by id, fails.
		marker := *c.del("src", "a b/orig+1", "").VersionId
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"),
			CopySource: aws.String("src/a%20b/orig%2B1")})
		wantErr(t, err, 404, "NoSuchKey")
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"),
			CopySource: aws.String("src/a%20b/orig%2B1?versionId=" + marker)})
		wantErr(t, err, 400, "InvalidRequest")
		_, err = c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"),
			CopySource: aws.String("nobucket/x")})
		wantErr(t, err, 404, "NoSuchBucket")
		// A copy of an old version revives it as the latest.
		must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("a b/orig+1"),
			CopySource: aws.String("src/a%20b/orig%2B1?versionId=" + v1)}))
		_, got = c.get("src", "a b/orig+1", "")
		if !bytes.Equal(got, body) {
			t.Fatal("restoring copy has different bytes")
		}
	})
}

func TestS3DeleteObjects(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("multi")
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			c.put("multi", k, []byte(k))
		}
		ids := func(keys ...string) []s3types.ObjectIdentifier {
			var out []s3types.ObjectIdentifier
			for _, k := range keys {
				key, v, _ := strings.Cut(k, "@")
				oi := s3types.ObjectIdentifier{Key: aws.String(key)}
				if v != "" {
					oi.VersionId = aws.String(v)
				}
				out = append(out, oi)
			}
			return out
		}
		res := must(c.c.DeleteObjects(c.ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("multi"),
			Delete: &s3types.Delete{Objects: ids("a", "b", "zz")}}))
		var deleted []string
		for _, d := range res.Deleted {
			deleted = append(deleted, *d.Key)
			if aws.ToBool(d.DeleteMarker) {
				t.Errorf("unversioned batch delete of %s reported a marker", *d.Key)
			}
		}
		eq(t, "deleted", strings.Join(deleted, ","), "a,b,zz")
		eq(t, "errors", len(res.Errors), 0)
		res = must(c.c.DeleteObjects(c.ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("multi"),
			Delete: &s3types.Delete{Objects: ids("c", "d@null", "e@not-an-id"), Quiet: aws.Bool(true)}}))
		eq(t, "quiet: deleted entries", len(res.Deleted), 0)
		if len(res.Errors) != 1 || *res.Errors[0].Key != "e" || *res.Errors[0].Code != "InvalidArgument" {
			t.Fatalf("quiet errors: %+v", res.Errors)
		}
		eq(t, "left", strings.Join(c.keys("multi", "", 1000), ","), "e")

		c.versioning("multi", s3types.BucketVersioningStatusEnabled)
		v := *c.put("multi", "f", []byte("f")).VersionId
		res = must(c.c.DeleteObjects(c.ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("multi"),
			Delete: &s3types.Delete{Objects: ids("e", "f@"+v)}}))
		eq(t, "versioned deleted", len(res.Deleted), 2)
		for _, d := range res.Deleted {
			switch *d.Key {
			case "e":
				if !aws.ToBool(d.DeleteMarker) || len(aws.ToString(d.DeleteMarkerVersionId)) != 32 || d.VersionId != nil {
					t.Errorf("e: marker %v id %v version %v", d.DeleteMarker, d.DeleteMarkerVersionId, d.VersionId)
				}
			case "f":
				eq(t, "f version", aws.ToString(d.VersionId), v)
				eq(t, "f marker", aws.ToBool(d.DeleteMarker), false)
			}
		}
		eq(t, "versions", len(c.versions("multi", 1000)), 2) // e@null and e's marker
		eq(t, "live", len(c.keys("multi", "", 1000)), 0)
	})
}

func TestS3Listings(t *testing.T) {
	forEachConfig(t, func(t *testing.T, c s3Test, _ bool) {
		c.createBucket("list")
		c.versioning("list", s3types.BucketVersioningStatusEnabled)
		var want []string
		for i := range 9 {
			for _, k := range []string{"top%d", "dir/f%d", "dir/sub%d/x", "z/%d"} {
				key := fmt.Sprintf(k, i)
				c.put("list", key, []byte("1"))
				want = append(want, key)
			}
		}
		for i := range 3 {
			c.put("list", fmt.Sprintf("top%d", i), []byte("2")) // second versions
			c.del("list", fmt.Sprintf("z/%d", i), "")           // hidden keys
		}
		slices.Sort(want)
		var live []string
		for _, k := range want {
			if k != "z/0" && k != "z/1" && k != "z/2" {
				live = append(live, k)
			}
		}
		for _, n := range []int32{1, 4, 7, 1000} {
			eq(t, fmt.Sprintf("v2 keys, pages of %d", n), strings.Join(c.keys("list", "", n), ","), strings.Join(live, ","))
		}
		eq(t, "v2 prefix", strings.Join(c.keys("list", "dir/sub1", 2), ","), "dir/sub1/x")

		// Delimiter listings page through common prefixes once each.
		var got []string
		p := awss3.NewListObjectsV2Paginator(c.c, &awss3.ListObjectsV2Input{Bucket: aws.String("list"),
			Prefix: aws.String("dir/"), Delimiter: aws.String("/"), MaxKeys: aws.Int32(4)})
		for p.HasMorePages() {
			page := must(p.NextPage(c.ctx))
			for _, o := range page.Contents {
				got = append(got, *o.Key)
				if o.Owner != nil {
					t.Error("v2 listing without fetch-owner shows the owner")
				}
			}
			for _, cp := range page.CommonPrefixes {
				got = append(got, *cp.Prefix)
			}
			eq(t, "KeyCount", int(*page.KeyCount), len(page.Contents)+len(page.CommonPrefixes))
		}
		slices.Sort(got)
		eq(t, "delimited", strings.Join(got, ","),
			"dir/f0,dir/f1,dir/f2,dir/f3,dir/f4,dir/f5,dir/f6,dir/f7,dir/f8,dir/sub0/,dir/sub1/,dir/sub2/,dir/sub3/,dir/sub4/,dir/sub5/,dir/sub6/,dir/sub7/,dir/sub8/")

		// start-after and fetch-owner.
		page := must(c.c.ListObjectsV2(c.ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("list"),
			StartAfter: aws.String("top6"), FetchOwner: aws.Bool(true)}))
		var keys []string
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
			eq(t, "owner", aws.ToString(o.Owner.DisplayName), "root")
			eq(t, "storage class", o.StorageClass, s3types.ObjectStorageClassStandard)
			eq(t, "size", aws.ToInt64(o.Size), int64(1))
		}
		eq(t, "start-after", strings.Join(keys, ","), "top7,top8,z/3,z/4,z/5,z/6,z/7,z/8")

		// ListObjects v1, paging by marker.
		keys = nil
		marker := ""
		for {
			page := must(c.c.ListObjects(c.ctx, &awss3.ListObjectsInput{Bucket: aws.String("list"), Marker: &marker, MaxKeys: aws.Int32(5)}))
			for _, o := range page.Contents {
				keys = append(keys, *o.Key)
				if o.Owner == nil || *o.Owner.DisplayName != "root" {
					t.Fatal("v1 listing without owner")
				}
			}
			if !aws.ToBool(page.IsTruncated) {
				break
			}
			marker = keys[len(keys)-1]
		}
		eq(t, "v1 keys", strings.Join(keys, ","), strings.Join(live, ","))

		// Versions: every row, markers included, across pages of any size.
		all := c.versions("list", 1000)
		eq(t, "version rows", len(all), 36+3+3)
		for _, n := range []int32{1, 2, 5} {
			eq(t, fmt.Sprintf("versions in pages of %d", n), strings.Join(c.versions("list", n), " "), strings.Join(all, " "))
		}
		vp := must(c.c.ListObjectVersions(c.ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("list"),
			Prefix: aws.String("z/"), Delimiter: aws.String("/")}))
		eq(t, "versions under z/", len(vp.Versions)+len(vp.DeleteMarkers), 12)
		vp = must(c.c.ListObjectVersions(c.ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("list"),
			Delimiter: aws.String("/")}))
		var cps []string
		for _, cp := range vp.CommonPrefixes {
			cps = append(cps, *cp.Prefix)
		}
		eq(t, "version common prefixes", strings.Join(cps, ","), "dir/,z/")
		eq(t, "top-level versions", len(vp.Versions), 12)
	})
}

func TestS3Owners(t *testing.T) {
	srv := startS3(t, true)
	root := s3Test{t: t, ctx: context.Background(), c: srv.client(false)}
	alice := s3Test{t: t, ctx: context.Background(), c: srv.client(false, func(o *awss3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(s3AliceKey, s3AliceSecret, "")
	})}
	defer recoverMust(t)
	root.createBucket("roots")
	root.put("roots", "secret", []byte("root's"))
	alice.createBucket("alices")
	alice.put("alices", "mine", []byte("alice's"))

	eq(t, "alice's buckets", strings.Join(bucketNames(alice), ","), "alices")
	eq(t, "root's buckets", strings.Join(bucketNames(root), ","), "alices,roots")

	// Alice can touch nothing of the root's.
	wantErr(t, alice.getErr("roots", "secret", ""), 403, "AccessDenied")
	_, err := alice.c.PutObject(alice.ctx, &awss3.PutObjectInput{Bucket: aws.String("roots"), Key: aws.String("secret"),
		Body: strings.NewReader("overwritten")})
	wantErr(t, err, 403, "AccessDenied")
	_, err = alice.c.ListObjectsV2(alice.ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("roots")})
	wantErr(t, err, 403, "AccessDenied")
	_, err = alice.c.DeleteObjects(alice.ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("roots"),
		Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String("secret")}}}})
	wantErr(t, err, 403, "AccessDenied")
	_, err = alice.c.CopyObject(alice.ctx, &awss3.CopyObjectInput{Bucket: aws.String("alices"), Key: aws.String("stolen"),
		CopySource: aws.String("roots/secret")})
	wantErr(t, err, 403, "AccessDenied")
	_, err = alice.c.CreateBucket(alice.ctx, &awss3.CreateBucketInput{Bucket: aws.String("roots")})
	wantErr(t, err, 409, "BucketAlreadyExists")
	_, err = alice.c.DeleteBucket(alice.ctx, &awss3.DeleteBucketInput{Bucket: aws.String("roots")})
	wantErr(t, err, 403, "AccessDenied")
	_, got := root.get("roots", "secret", "")
	eq(t, "root's object", string(got), "root's")
	wantErr(t, alice.getErr("alices", "stolen", ""), 404, "NoSuchKey")

	// The root may use Alice's bucket; listings show who wrote what.
	root.put("alices", "from-root", []byte("x"))
	page := must(root.c.ListObjectsV2(root.ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("alices"), FetchOwner: aws.Bool(true)}))
	var owners []string
	for _, o := range page.Contents {
		owners = append(owners, *o.Key+"="+*o.Owner.DisplayName)
	}
	eq(t, "owners", strings.Join(owners, ","), "from-root=root,mine="+s3AliceKey)
}

// bucketNames lists the buckets c sees.
func bucketNames(c s3Test) []string {
	c.t.Helper()
	var names []string
	for _, b := range must(c.c.ListBuckets(c.ctx, &awss3.ListBucketsInput{})).Buckets {
		names = append(names, *b.Name)
	}
	return names
}

// TestS3StoredKeys signs with access keys kept in the meta store: each is
// an owner of its own, shown by its name, unless marked root; a deleted
// key is refused at once.
func TestS3StoredKeys(t *testing.T) {
	srv := startS3(t, false)
	ctx := context.Background()
	as := func(k meta.AccessKey) s3Test {
		if _, err := srv.svc.CreateAccessKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return s3Test{t: t, ctx: ctx, c: srv.client(true, func(o *awss3.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(k.ID, k.Secret, "")
		})}
	}
	dave, admin := object.NewAccessKey("dave", false), object.NewAccessKey("admin", true)
	dc, ac := as(dave), as(admin)
	alice := s3Test{t: t, ctx: ctx, c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(s3AliceKey, s3AliceSecret, "")
	})}
	defer recoverMust(t)
	dc.createBucket("daves")
	dc.put("daves", "k", []byte("dave's"))
	alice.createBucket("alices")
	lb := must(dc.c.ListBuckets(ctx, &awss3.ListBucketsInput{}))
	eq(t, "dave's buckets", len(lb.Buckets), 1)
	eq(t, "dave's display name", aws.ToString(lb.Owner.DisplayName), "dave")
	wantErr(t, dc.getErr("alices", "k", ""), 403, "AccessDenied")
	_, err := alice.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("daves")})
	wantErr(t, err, 403, "AccessDenied")

	// A stored key marked root uses every bucket.
	eq(t, "root key's buckets", strings.Join(bucketNames(ac), ","), "alices,daves")
	_, got := ac.get("daves", "k", "")
	eq(t, "read by a stored root key", string(got), "dave's")
	ac.put("alices", "from-admin", []byte("x"))

	if err := srv.svc.DeleteAccessKey(ctx, dave.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, dc.getErr("daves", "k", ""), 403, "InvalidAccessKeyId")
}
