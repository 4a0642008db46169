// Package s3 serves the S3 REST API over the object core: real S3
// clients (the AWS SDKs and CLI, rclone, s3cmd) read and write the same
// versioned buckets as the FUSE mount, delete markers included.
//
// Every request is authenticated with Signature V4 (package sigv4) before
// any handler runs, and the handlers call only package object: what S3
// shows is exactly what the core's semantics table says. Operations not
// implemented answer NotImplemented and touch nothing.
package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// Config configures a Handler.
type Config struct {
	// Region is the region clients sign for and GetBucketLocation reports;
	// "us-east-1" when empty.
	Region string
	// Domains are the host names under which virtual-hosted-style
	// requests (BUCKET.DOMAIN) arrive. Requests to any other host use the
	// path style (DOMAIN/BUCKET/KEY).
	Domains []string
	// Keys are access keys that may sign requests besides those stored
	// in the meta store, which are looked up when Keys does not know a
	// key. Nil: only the stored keys.
	Keys sigv4.Keys
	// RootAccessKey is the key whose requests act as the root owner, who
	// may use every bucket, as do stored keys marked Root. Every other key
	// is an owner of its own: it sees and uses only the buckets it
	// created.
	RootAccessKey string
	// Logger receives one line per request; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock signatures are checked against; time.Now when nil.
	Now func() time.Time
	// MaxWrites is how many request bodies (PutObject, UploadPart) are
	// stored at once; more wait their turn. The core streams each body it
	// stores to chunk files through 1 MiB of buffers, so over a chunk
	// store of local files the buffers of writes stay under MaxWrites ×
	// 1 MiB. A store that takes only whole chunks (a remote S3 bucket)
	// costs each body up to three chunk buffers besides: MaxWrites ×
	// (3 × the chunk size (8 MiB by default) + 1 MiB).
	// DefaultMaxWrites when 0 or less.
	MaxWrites int
	// MaxRequests is how many requests are served at once; one more is
	// answered 503 SlowDown at once, as S3 answers a client to back off
	// (the SDKs retry it with backoff), rather than queued without
	// bound. DefaultMaxRequests when 0 or less.
	MaxRequests int
	// MaxReads is how many GetObject bodies are sent at once; one more is
	// answered 503 SlowDown. From a chunk store of local files a body
	// goes through no buffer of ours (over plain HTTP the kernel sends the
	// files with sendfile; over TLS net/http copies them through 32 KiB);
	// from any other store each holds up to a chunk buffer (8 MiB by
	// default) of read-ahead.
	// DefaultMaxReads when 0 or less.
	MaxReads int
	// Metrics, when set, count and time every request.
	Metrics *Metrics
}

// Defaults of Config: at most 16 × 1 MiB = 16 MiB of write buffers over
// local chunk files, and over a remote chunk store 16 × 25 MiB = 400 MiB
// of write buffers and 64 × 8 MiB = 512 MiB of read buffers.
const (
	DefaultMaxWrites   = 16
	DefaultMaxReads    = 64
	DefaultMaxRequests = 1024
)

// A Handler is the S3 endpoint. It is safe for concurrent use.
type Handler struct {
	svc    *object.Service
	cfg    Config
	verify *sigv4.Verifier
	log    *slog.Logger
	writes chan struct{} // a token per body being stored
	reads  limit         // GetObject bodies being sent
	all    limit         // requests being served
}

// A limit counts what is in progress against a bound.
type limit chan struct{}

// take reports whether there was room, and then holds one place until
// the returned release is called.
func (l limit) take() (release func(), ok bool) {
	select {
	case l <- struct{}{}:
		return func() { <-l }, true
	default:
		return nil, false
	}
}

// New returns the S3 endpoint over the core svc.
func New(svc *object.Service, cfg Config) *Handler {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxWrites <= 0 {
		cfg.MaxWrites = DefaultMaxWrites
	}
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = DefaultMaxReads
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = DefaultMaxRequests
	}
	return &Handler{
		svc:    svc,
		cfg:    cfg,
		verify: &sigv4.Verifier{Region: cfg.Region, Keys: keyring{fixed: cfg.Keys, svc: svc}, Now: cfg.Now},
		log:    cfg.Logger,
		writes: make(chan struct{}, cfg.MaxWrites),
		reads:  make(limit, cfg.MaxReads),
		all:    make(limit, cfg.MaxRequests),
	}
}

// acquireWrite waits until fewer than MaxWrites bodies are being stored
// and returns the function that ends this one's turn. A client waiting
// here is not read from, so TCP holds its body back.
func (h *Handler) acquireWrite(q *request) (release func(), err error) {
	select {
	case h.writes <- struct{}{}:
		return func() { <-h.writes }, nil
	case <-q.ctx.Done():
		return nil, fmt.Errorf("waiting to store a body: %w", context.Cause(q.ctx))
	}
}

// request is what the handlers know about one S3 request.
type request struct {
	r      *http.Request
	ctx    context.Context
	id     string
	bucket string
	key    string
	query  url.Values
	auth   *sigv4.Request
	owner  string            // the requester as the meta store records owners
	op     string            // the S3 operation, for the log
	owners map[string]*Owner // owners shown so far, by id (see ownerOf)
}

// errAborted ends a response whose headers were already sent: the
// connection is cut so the client sees a truncated body, not a short
// success.
var errAborted = errors.New("response aborted")

// ServeHTTP serves one S3 request and logs it: one line, with the error
// that failed it, if any.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := &request{r: r, ctx: r.Context(), id: newRequestID()}
	w.Header().Set("x-amz-request-id", q.id)
	w.Header().Set("Server", "stratafs")
	sw := &statusWriter{ResponseWriter: w}
	b := &body{ReadCloser: r.Body}
	r.Body = b
	var err error
	if release, ok := h.all.take(); ok {
		err = h.serve(sw, q)
		release()
	} else {
		err = errSlowDown.with("More than %d requests are in progress.", h.cfg.MaxRequests)
	}
	if err != nil && !errors.Is(err, errAborted) {
		b.drain(sw, r)
		h.writeError(sw, q, err)
	}
	level := slog.LevelInfo
	attrs := []slog.Attr{
		slog.String("id", q.id), slog.String("op", q.op), slog.String("method", r.Method),
		slog.String("bucket", q.bucket), slog.String("key", q.key), slog.Int("status", sw.status),
		slog.Int64("bytes", sw.n), slog.Duration("took", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
		if sw.status >= 500 || errors.Is(err, errAborted) {
			level = slog.LevelError
		}
	}
	h.log.LogAttrs(q.ctx, level, "s3", attrs...)
	status := sw.status
	if status == 0 { // nothing written: net/http sends 200
		status = http.StatusOK
	}
	h.cfg.Metrics.observe(q.op, status, time.Since(start))
	if errors.Is(err, errAborted) {
		panic(http.ErrAbortHandler)
	}
}

// serve authenticates and routes a request. Authentication comes first:
// an unsigned request learns nothing, not even what is implemented.
func (h *Handler) serve(w http.ResponseWriter, q *request) error {
	q.bucket, q.key = h.resource(q.r)
	q.query = q.r.URL.Query()
	rt, routeErr := route(q)
	q.op = rt.name
	var err error
	if q.auth, err = h.verify.Verify(q.r); err != nil {
		return err
	}
	if q.owner, err = h.requester(q.ctx, q.auth.AccessKey); err != nil {
		return err
	}
	switch {
	case routeErr != nil:
		return routeErr
	case len(q.key) > meta.MaxKeyLen:
		return errKeyTooLong
	case q.bucket != "" && rt.name != "CreateBucket":
		if err := h.authorize(q, q.bucket); err != nil {
			return err
		}
	}
	return rt.serve(h, w, q)
}

// authorize lets the requester use a bucket: the root may use every
// bucket, any other key only the buckets it owns. A bucket that does not
// exist is NoSuchBucket for everyone, as in S3.
func (h *Handler) authorize(q *request, bucket string) error {
	if q.owner == "" {
		return nil
	}
	b, err := h.svc.Bucket(q.ctx, bucket)
	if err != nil {
		return err
	}
	if b.Owner != q.owner {
		return errAccessDenied
	}
	return nil
}

// resource splits a request into bucket and key, from the host
// (virtual-hosted style) or the path (path style).
func (h *Handler) resource(r *http.Request) (bucket, key string) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	host := r.Host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.ToLower(host)
	for _, d := range h.cfg.Domains {
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b, path
		}
	}
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key
}

// writeError sends err as an S3 error document (no body for HEAD).
func (h *Handler) writeError(w http.ResponseWriter, q *request, err error) {
	// The details of an internal error reach only the log, by the access
	// line of the request.
	e := apiError(err)
	if q.r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	doc := errorDoc{Code: e.Code, Message: e.Message, Resource: q.r.URL.Path, RequestID: q.id}
	if werr := writeXML(w, e.Status, doc); werr != nil {
		h.log.LogAttrs(q.ctx, slog.LevelDebug, "s3 writing error", slog.String("id", q.id), slog.String("err", werr.Error()))
	}
}

// A body is a request's body that notes how far it was read, for drain.
type body struct {
	io.ReadCloser
	read, done bool
}

func (b *body) Read(p []byte) (int, error) {
	b.read = true
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
	}
	return n, err
}

// Bounds of drain.
const (
	maxDrain     = 64 << 20
	drainTimeout = 10 * time.Second
)

// drain reads and drops what is left of the body, up to maxDrain bytes
// and for drainTimeout at most, before an error answers the request. A
// client still sending its body when the server closes the connection
// gets a reset, and its kernel drops the answer unread: it would report
// "connection reset" instead of, say, InsufficientStorage. A body never
// read is left alone when the client waits for 100 Continue: it will not
// send it. Past the bounds net/http closes the connection after the
// answer, as it does for any body a handler leaves unread.
func (b *body) drain(w http.ResponseWriter, r *http.Request) {
	if b.done || !b.read && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(drainTimeout)) == nil {
		defer rc.SetReadDeadline(time.Time{})
	}
	io.CopyN(io.Discard, b.ReadCloser, maxDrain)
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// statusWriter records the status and size of a response for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// ReadFrom passes a body on to the ResponseWriter's own ReadFrom, if it
// has one: net/http's sends an *os.File (or an io.LimitedReader over one)
// with sendfile, which a GetObject of local chunk files relies on.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{w}, r)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := rf.ReadFrom(r)
	w.n += n
	return n, err
}

// writerOnly hides a writer's ReadFrom from io.Copy, which would
// otherwise call it again.
type writerOnly struct{ io.Writer }

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
