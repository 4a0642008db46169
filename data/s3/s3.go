// Package s3 keeps chunks as objects in a bucket of any S3-compatible
// service, so that several stratafs processes on several machines can
// share one chunk store. Chunk id (32 hex) under an optional prefix names
// the object: prefix/0123…cdef. Objects are written once and never
// changed, which is all S3's consistency needs to give.
//
// It speaks S3 with the AWS SDK for Go v2: credentials come from the
// SDK's default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE and the shared files, then the instance roles), retries are
// the SDK's standard retryer (exponential backoff with jitter) with a
// bound on attempts, and a semaphore bounds the requests in flight. Puts
// stream from the caller's buffer and reads stream into it; a chunk read
// in order in small pieces, as the mount reads, is fetched a window at a
// time (readahead.go).
//
// Use an unversioned bucket (or one with a lifecycle rule that expires
// noncurrent versions): on a versioned bucket Delete leaves the bytes
// behind as an old version.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/stratafs/data"
)

// Defaults of the URL parameters.
const (
	DefaultConcurrency = 16
	DefaultMaxAttempts = 5
	DefaultTimeout     = time.Minute
	// defaultRegion is what a store without ?region= and without AWS_REGION
	// signs for: every S3-compatible service accepts it.
	defaultRegion = "us-east-1"
)

// Options say where the chunks live and how to reach them.
type Options struct {
	Bucket string
	Prefix string // without leading or trailing "/"; "" puts chunks at the top of the bucket
	// Endpoint is the service's URL (http://host:port); empty means AWS.
	// Requests to an endpoint address the bucket path-style, which every
	// S3-compatible service understands.
	Endpoint string
	Region   string // empty: AWS_REGION or the shared config, else us-east-1
	// Concurrency bounds the requests in flight, Put, ReadAt, Delete and
	// listing pages together (DefaultConcurrency when 0).
	Concurrency int
	// MaxAttempts bounds the tries of one request, the first included
	// (DefaultMaxAttempts when 0); throttling, 5xx answers and broken
	// connections are retried with exponential backoff.
	MaxAttempts int
	// MaxBackoff caps the delay before a retry (the SDK's 20 s when 0).
	MaxBackoff time.Duration
	// Timeout bounds one operation, its retries included (DefaultTimeout
	// when 0), so that a remote that stops answering fails the operation
	// instead of hanging it.
	Timeout time.Duration
	// Credentials replace the SDK's default chain when not nil.
	Credentials aws.CredentialsProvider
	// ReadAhead is the window a chunk read in order in small pieces is
	// fetched by (DefaultReadAhead when 0, none when negative).
	ReadAhead int
	// Registerer gets the store's Prometheus metrics (none when nil).
	Registerer prometheus.Registerer
}

// ParseURL reads s3://bucket/prefix?endpoint=…&region=…&concurrency=…&max_attempts=…&timeout=….
func ParseURL(rawURL string) (Options, error) {
	var o Options
	u, err := url.Parse(rawURL)
	if err != nil {
		return o, err
	}
	if u.Scheme != "s3" || u.Host == "" || u.User != nil || u.Opaque != "" {
		return o, errors.New("want s3://bucket[/prefix][?endpoint=http://host:port&region=r&concurrency=16&max_attempts=5&timeout=1m]")
	}
	o.Bucket, o.Prefix = u.Host, strings.Trim(u.Path, "/")
	for k, v := range u.Query() {
		val := v[len(v)-1]
		switch k {
		case "endpoint":
			e, err := url.Parse(val)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return o, fmt.Errorf("endpoint %q: want http://host:port or https://host", val)
			}
			o.Endpoint = val
		case "region":
			o.Region = val
		case "concurrency", "max_attempts":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return o, fmt.Errorf("%s %q: want a number of at least 1", k, val)
			}
			if k == "concurrency" {
				o.Concurrency = n
			} else {
				o.MaxAttempts = n
			}
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return o, fmt.Errorf("timeout %q: want a positive duration", val)
			}
			o.Timeout = d
		default:
			return o, fmt.Errorf("unknown parameter %q (endpoint, region, concurrency, max_attempts, timeout)", k)
		}
	}
	return o, nil
}

// Store keeps chunks as objects. It is safe for concurrent use.
type Store struct {
	client  *awss3.Client
	bucket  string
	prefix  string // "" or ending in "/"
	where   string // s3://bucket/prefix, for errors
	timeout time.Duration
	// attempts and backoff are the retryer's bound and delays, for the
	// bodies ReadAt reads again.
	attempts int
	backoff  *retry.ExponentialJitterBackoff
	sem      chan struct{} // a slot per request in flight
	idle     func()        // closes the transport's idle connections
	m        *metrics
	ra       readAhead
}

var _ data.Store = (*Store)(nil)

// Open connects to the bucket and lists one key under the prefix, so that
// a wrong endpoint, bucket or credentials fail here, with the service's
// own words, rather than on the first write.
func Open(ctx context.Context, o Options) (*Store, error) {
	o = o.withDefaults()
	s := &Store{
		bucket:   o.Bucket,
		where:    "s3://" + o.Bucket + "/" + o.Prefix,
		timeout:  o.Timeout,
		attempts: o.MaxAttempts,
		backoff:  retry.NewExponentialJitterBackoff(o.MaxBackoff),
		sem:      make(chan struct{}, o.Concurrency),
		ra:       readAhead{size: int64(max(o.ReadAhead, 0))},
	}
	if o.Prefix != "" {
		s.prefix = o.Prefix + "/"
	}
	s.m = newMetrics(o.Registerer, func() float64 { return float64(len(s.sem)) })
	client, idle, err := newClient(ctx, o, s.m)
	if err != nil {
		return nil, fmt.Errorf("chunk store %s: %w", s.where, err)
	}
	s.client, s.idle = client, idle
	err = s.do(ctx, "list", func(ctx context.Context) error {
		_, err := s.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
			Bucket: &s.bucket, Prefix: &s.prefix, MaxKeys: aws.Int32(1),
		})
		return err
	})
	if err != nil {
		idle()
		return nil, fmt.Errorf("chunk store %s: %w", s.where, err)
	}
	return s, nil
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = retry.DefaultMaxBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	return o
}

// newClient builds the SDK client: the default credential chain, a
// connection pool as large as the concurrency, and the standard retryer
// without its client-side retry quota, which after a burst of failures
// would refuse retries for a while although the remote is back.
func newClient(ctx context.Context, o Options, m *metrics) (*awss3.Client, func(), error) {
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return countingRetryer{retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = o.MaxBackoff
				so.RateLimiter = ratelimit.None
			}), m}
		}),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	// The SDK's transport, with AWS_CA_BUNDLE applied, in a client of our
	// own whose idle connections Close can shut.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	}
	tr.MaxIdleConnsPerHost = o.Concurrency
	cfg.HTTPClient = &http.Client{
		Transport: tr,
		// As the SDK's own client: a redirect is an answer, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
		}
		// A ranged GET has no whole-object checksum to check.
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return client, tr.CloseIdleConnections, nil
}

// do runs operation op (one request and its retries) in a free slot,
// under the store's timeout, and counts it in the metrics. An error that
// says the remote could not be reached wraps data.ErrUnavailable.
func (s *Store) do(ctx context.Context, op string, fn func(context.Context) error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	opCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	err := fn(opCtx)
	s.m.observe(op, err, time.Since(start))
	if unreachable(ctx, err) {
		return fmt.Errorf("%w: %w", data.ErrUnavailable, err)
	}
	return err
}

// unreachable says whether err, what an operation under ctx ended with
// once the SDK's retries were spent, means the remote could not be
// reached or could not answer: no connection (refused, reset, cut
// mid-body), no answer within the store's timeout, or a 5xx. The
// caller's own cancellation, and a 4xx, are neither.
func unreachable(ctx context.Context, err error) bool {
	var (
		ne     net.Error
		cut    bodyCut
		status interface{ HTTPStatusCode() int }
	)
	switch {
	case err == nil, ctx.Err() != nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne), errors.As(err, &cut):
		return true
	}
	return errors.As(err, &status) && status.HTTPStatusCode() >= 500
}

func (s *Store) key(id data.ChunkID) string { return s.prefix + id.String() }

// Put uploads chunk id in one PutObject, streamed from b; the remote's
// answer makes it durable (S3 acknowledges a PUT once stored).
func (s *Store) Put(ctx context.Context, id data.ChunkID, b []byte) error {
	body := &fencedReader{r: bytes.NewReader(b)}
	// The HTTP transport may go on reading a body after a failed request
	// returns; the fence keeps it off b, which the caller reuses.
	defer body.close()
	err := s.do(ctx, "put", func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: &s.bucket, Key: aws.String(s.key(id)),
			Body: body, ContentLength: aws.Int64(int64(len(b))),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("put chunk %s to %s: %w", id, s.where, err)
	}
	return nil
}

// ReadAt reads len(p) bytes of chunk id at off with a ranged GetObject,
// streamed into p, or from a read-ahead window for a small read in order.
// A body cut short by the network is asked for again from
// where it broke off, up to MaxAttempts times with the SDK's backoff: the
// SDK retries requests, not the reading of their bodies.
func (s *Store) ReadAt(ctx context.Context, id data.ChunkID, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read chunk %s at %d: %w", id, off, data.ErrRange)
	}
	if len(p) == 0 {
		return 0, s.head(ctx, id)
	}
	if n, err, ok := s.readWindowed(ctx, id, p, off); ok {
		return n, err
	}
	return s.read(ctx, id, p, off)
}

// read reads len(p) bytes of chunk id at off, as ReadAt does, without
// read-ahead.
func (s *Store) read(ctx context.Context, id data.ChunkID, p []byte, off int64) (int, error) {
	n := 0
	for attempt := 1; ; attempt++ {
		k, err := s.readRange(ctx, id, p[n:], off+int64(n))
		n += k
		var cut bodyCut
		switch {
		case err == nil || err == io.EOF:
			return n, err
		case hasCode(err, "InvalidRange"): // off is at or past the end
			return n, io.EOF
		case notFound(err):
			return n, fmt.Errorf("chunk %s in %s: %w", id, s.where, data.ErrNoSuchChunk)
		case errors.As(err, &cut) && attempt < s.attempts:
			d, _ := s.backoff.BackoffDelay(attempt, err)
			t := time.NewTimer(d)
			select {
			case <-t.C:
				s.m.retried()
				continue
			case <-ctx.Done():
				t.Stop()
				err = fmt.Errorf("%w (after %w)", ctx.Err(), err)
			}
		}
		return n, fmt.Errorf("read chunk %s from %s: %w", id, s.where, err)
	}
}

// bodyCut is an error met while reading a body the remote had begun to
// send: the connection broke, or it ended before its announced length.
type bodyCut struct{ error }

func (b bodyCut) Unwrap() error { return b.error }

// readRange makes one GetObject of the bytes [off, off+len(p)) and reads
// what the remote holds of them into p: io.EOF when the chunk ends first.
func (s *Store) readRange(ctx context.Context, id data.ChunkID, p []byte, off int64) (int, error) {
	n := 0
	err := s.do(ctx, "get", func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{
			Bucket: &s.bucket, Key: aws.String(s.key(id)),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
		})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		start, count := off, aws.ToInt64(out.ContentLength)
		if out.ContentRange != nil {
			start, count = parseContentRange(*out.ContentRange)
		}
		if start != off || count < 0 {
			return fmt.Errorf("asked for bytes from %d, the answer holds %q: %w", off, aws.ToString(out.ContentRange), data.ErrCorrupt)
		}
		n, err = io.ReadFull(out.Body, p[:min(count, int64(len(p)))])
		if err != nil {
			return bodyCut{err}
		}
		if n < len(p) {
			return io.EOF
		}
		return nil
	})
	return n, err
}

// parseContentRange returns where a Content-Range ("bytes 100-199/1000")
// starts and how many bytes it holds; -1s when it is not one.
func parseContentRange(cr string) (start, count int64) {
	v, ok := strings.CutPrefix(cr, "bytes ")
	v, _, ok2 := strings.Cut(v, "/")
	first, last, ok3 := strings.Cut(v, "-")
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	if !ok || !ok2 || !ok3 || err1 != nil || err2 != nil || b < a {
		return -1, -1
	}
	return a, b - a + 1
}

// head checks that chunk id exists, for reads of no bytes.
func (s *Store) head(ctx context.Context, id data.ChunkID) error {
	err := s.do(ctx, "head", func(ctx context.Context) error {
		_, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(id))})
		return err
	})
	if notFound(err) {
		return fmt.Errorf("chunk %s in %s: %w", id, s.where, data.ErrNoSuchChunk)
	}
	if err != nil {
		return fmt.Errorf("read chunk %s from %s: %w", id, s.where, err)
	}
	return nil
}

// notFound says whether err is the remote's "no such key" (GetObject's
// NoSuchKey, HeadObject's bodiless 404): a missing bucket is not a missing
// chunk, and must not read as one.
func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || hasCode(err, "NoSuchKey")
}

func hasCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// Delete removes chunk id; S3 answers a DELETE of a missing key with
// success, and so does Delete.
func (s *Store) Delete(ctx context.Context, id data.ChunkID) error {
	err := s.do(ctx, "delete", func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(id))})
		return err
	})
	if err != nil && !notFound(err) {
		return fmt.Errorf("delete chunk %s from %s: %w", id, s.where, err)
	}
	s.ra.drop(id, func(*window) bool { return true })
	return nil
}

// Walk lists the prefix page by page (ListObjectsV2, 1,000 keys a page),
// calling fn for every key that is a chunk; other keys, and everything
// under deeper prefixes, are not chunks and are skipped. fn runs outside
// the request slots, so it may call Delete even with a concurrency of 1.
func (s *Store) Walk(ctx context.Context, fn func(id data.ChunkID, size int64, modified time.Time) error) error {
	pages := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: &s.bucket, Prefix: &s.prefix, Delimiter: aws.String("/"),
	})
	for pages.HasMorePages() {
		var page *awss3.ListObjectsV2Output
		err := s.do(ctx, "list", func(ctx context.Context) (err error) {
			page, err = pages.NextPage(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("walk chunks in %s: %w", s.where, err)
		}
		for _, o := range page.Contents {
			id, err := data.ParseChunkID(strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
			if err != nil {
				continue
			}
			if err := fn(id, aws.ToInt64(o.Size), aws.ToTime(o.LastModified)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the idle connections; every Put is durable when it returns.
func (s *Store) Close() error {
	s.idle()
	return nil
}

// errFenced is what a request body reads once its Put has returned.
var errFenced = errors.New("chunk body read after its Put returned")

// fencedReader is a request body that stops reading its buffer once
// closed. It seeks, so the SDK can hash it and rewind it for a retry.
type fencedReader struct {
	mu     sync.Mutex
	r      *bytes.Reader
	closed bool
}

func (f *fencedReader) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errFenced
	}
	return f.r.Read(p)
}

func (f *fencedReader) Seek(off int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errFenced
	}
	return f.r.Seek(off, whence)
}

func (f *fencedReader) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}
