package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// The remote here is gofakes3, an in-process S3 that keeps objects in
// memory; integration/multinode_chunks_test.go runs the same contract
// against the stratafs S3 endpoint, which also checks signatures.

const testBucket = "chunks"

var testCreds = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")

// fakeS3 starts gofakes3 holding an empty bucket behind h's wrapping, and
// returns its URL.
func fakeS3(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	b := s3mem.New()
	if err := b.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(b, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func openStore(t *testing.T, o Options) *Store {
	t.Helper()
	if o.Bucket == "" {
		o.Bucket = testBucket
	}
	o.Credentials = testCreds
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) data.Store {
		return openStore(t, Options{Endpoint: fakeS3(t, nil), Prefix: "a/b"})
	})
}

func TestParseURL(t *testing.T) {
	o, err := ParseURL("s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000&region=eu-west-1&concurrency=4&max_attempts=2&timeout=5s")
	want := Options{Bucket: "bkt", Prefix: "some/prefix", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1",
		Concurrency: 4, MaxAttempts: 2, Timeout: 5 * time.Second}
	if err != nil || o != want {
		t.Fatalf("ParseURL = %+v, %v; want %+v", o, err, want)
	}
	if o, err := ParseURL("s3://bkt"); err != nil || o != (Options{Bucket: "bkt"}) {
		t.Fatalf("ParseURL(s3://bkt) = %+v, %v", o, err)
	}
	for _, u := range []string{"s3://", "s3:///p", "file:///x", "s3://b?bogus=1", "s3://b?concurrency=0",
		"s3://b?max_attempts=x", "s3://b?timeout=-1s", "s3://b?endpoint=127.0.0.1:9000", "s3://k:s@b"} {
		if _, err := ParseURL(u); err == nil {
			t.Errorf("ParseURL(%q) accepted", u)
		}
	}
}

// Chunks are objects named prefix/<id>; Walk reports those only, not
// other keys under the prefix, deeper prefixes or keys beside it.
func TestLayoutAndStrays(t *testing.T) {
	ctx := context.Background()
	url := fakeS3(t, nil)
	s := openStore(t, Options{Endpoint: url, Prefix: "p"})
	id := data.NewChunkID()
	if err := s.Put(ctx, id, []byte("chunk")); err != nil {
		t.Fatal(err)
	}
	other := data.NewChunkID().String()
	for _, k := range []string{"p/notes.txt", "p/sub/" + other, other, "p/" + strings.ToUpper(other), "pp/" + other} {
		if _, err := s.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("p/" + id.String())})
	if err != nil {
		t.Fatalf("chunk not at p/<id>: %v", err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(b) != "chunk" {
		t.Fatalf("p/<id> holds %q", b)
	}
	var seen []data.ChunkID
	if err := s.Walk(ctx, func(id data.ChunkID, _ int64, _ time.Time) error {
		seen = append(seen, id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != id {
		t.Fatalf("Walk saw %v, want only %s", seen, id)
	}
}

// Walk follows ListObjectsV2's continuation tokens past a page.
func TestWalkPages(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{Endpoint: fakeS3(t, nil), Concurrency: 1})
	want := map[data.ChunkID]bool{}
	for range 1003 {
		id := data.NewChunkID()
		want[id] = true
		if err := s.Put(ctx, id, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	// fn deletes as it goes: with one request slot, Walk must not hold it
	// while fn runs.
	n := 0
	if err := s.Walk(ctx, func(id data.ChunkID, _ int64, _ time.Time) error {
		if !want[id] {
			t.Errorf("Walk saw %s twice or never put", id)
		}
		delete(want, id)
		n++
		return s.Delete(ctx, id)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1003 || len(want) != 0 {
		t.Fatalf("Walk saw %d chunks, missed %d", n, len(want))
	}
}

// faults sits in front of the remote and breaks it on demand.
type faults struct {
	mode     atomic.Int32 // one of the fault constants
	requests atomic.Int32 // requests that met the fault
	cuts     atomic.Int32 // GET bodies still to cut short
}

const (
	healthy = iota
	unavailable
	hangUp
)

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch f.mode.Load() {
		case unavailable:
			f.requests.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		case hangUp:
			f.requests.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" && f.cuts.Add(-1) >= 0 {
			h.ServeHTTP(&halfWriter{ResponseWriter: w}, r)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-body
		}
		h.ServeHTTP(w, r)
	})
}

// halfWriter passes on the first half of the bytes written to it.
type halfWriter struct {
	http.ResponseWriter
}

func (h *halfWriter) Write(p []byte) (int, error) {
	_, err := h.ResponseWriter.Write(p[:len(p)/2])
	return len(p), err
}

// A remote that answers 503 or hangs up fails each operation with an
// error that names the chunk and the cause, after a bounded number of
// attempts; nothing panics, and the store works again once the remote is
// back.
func TestRemoteFaults(t *testing.T) {
	ctx := context.Background()
	f := &faults{}
	reg := prometheus.NewRegistry()
	s := openStore(t, Options{Endpoint: fakeS3(t, f.wrap), MaxAttempts: 3, MaxBackoff: 10 * time.Millisecond, Registerer: reg, ReadAhead: -1})
	kept := data.NewChunkID()
	want := storetest.Random(1, 5000)
	if err := s.Put(ctx, kept, want); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode  int32
		cause string
	}{{unavailable, "StatusCode: 503"}, {hangUp, "request send failed"}} {
		f.mode.Store(c.mode)
		id := data.NewChunkID()
		ops := map[string]func() error{
			"put chunk " + id.String(): func() error { return s.Put(ctx, id, want) },
			"read chunk " + kept.String(): func() error {
				_, err := s.ReadAt(ctx, kept, make([]byte, 10), 0)
				return err
			},
			"delete chunk " + kept.String(): func() error { return s.Delete(ctx, kept) },
			"walk chunks": func() error {
				return s.Walk(ctx, func(data.ChunkID, int64, time.Time) error { return nil })
			},
		}
		for what, op := range ops {
			f.requests.Store(0)
			err := op()
			if err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), c.cause) {
				t.Errorf("%s against a remote in fault mode %d: %v; want an error naming %q and %q", what, c.mode, err, what, c.cause)
			}
			if errors.Is(err, data.ErrNoSuchChunk) {
				t.Errorf("%s: a fault reads as a missing chunk: %v", what, err)
			}
			if !errors.Is(err, data.ErrUnavailable) {
				t.Errorf("%s against a remote in fault mode %d: %v; want data.ErrUnavailable", what, c.mode, err)
			}
			// Go's transport sends an idempotent request again, once, when
			// the pooled connection it picked turns out to be closed.
			if n := f.requests.Load(); n < 3 || n > 6 {
				t.Errorf("%s: %d requests, want 3 attempts (max_attempts), each sent at most twice", what, n)
			}
		}
	}
	f.mode.Store(healthy)
	// Two GETs cut short mid-body: ReadAt picks up where each broke off.
	f.cuts.Store(2)
	got := make([]byte, len(want))
	if n, err := s.ReadAt(ctx, kept, got, 0); err != nil || n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt with bodies cut short: %d bytes, %v", n, err)
	}
	if f.cuts.Load() >= 0 {
		t.Fatalf("the remote cut %d bodies short, want 2", 2-f.cuts.Load())
	}
	// More cuts than attempts: an error, not a short read taken for the
	// end of the chunk.
	f.cuts.Store(10)
	if _, err := s.ReadAt(ctx, kept, got, 0); err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "read chunk") || !errors.Is(err, data.ErrUnavailable) {
		t.Fatalf("ReadAt whose every body is cut short: %v; want data.ErrUnavailable", err)
	}
	f.cuts.Store(0)
	if _, err := s.ReadAt(ctx, data.NewChunkID(), got, 0); !errors.Is(err, data.ErrNoSuchChunk) || errors.Is(err, data.ErrUnavailable) {
		t.Fatalf("ReadAt of a missing chunk: %v", err)
	}

	// Each failed operation was tried 3 times (2 retries), and so was the
	// last ReadAt's body; the first ReadAt's was tried again twice.
	for _, c := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{s.m.retries, 2*4*2 + 2 + 2},
		{s.m.ops.WithLabelValues("put", "ok"), 1},
		{s.m.ops.WithLabelValues("put", "error"), 2},
		{s.m.ops.WithLabelValues("delete", "error"), 2},
		{s.m.ops.WithLabelValues("list", "ok"), 1}, // Open's
		{s.m.ops.WithLabelValues("list", "error"), 2},
		{s.m.ops.WithLabelValues("get", "ok"), 1},
		{s.m.ops.WithLabelValues("get", "error"), 2 + 2 + 3},
		{s.m.ops.WithLabelValues("get", "missing"), 1},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.c.(prometheus.Metric).Desc(), got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "stratafs_data_s3_requests_in_flight", "stratafs_data_s3_operation_duration_seconds"); err != nil || n != 1+4 {
		t.Errorf("registry holds %d in-flight and latency series, %v; want 1 and one per operation used (put, get, delete, list)", n, err)
	}
}

// A remote that refuses connections is unavailable; an operation its
// caller cancelled is not, whatever the remote.
func TestUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := "http://" + l.Addr().String()
	l.Close()
	_, err = Open(t.Context(), Options{Bucket: testBucket, Endpoint: refusing, Credentials: testCreds, MaxAttempts: 2, MaxBackoff: time.Millisecond})
	if !errors.Is(err, data.ErrUnavailable) {
		t.Errorf("Open against a port that refuses connections: %v; want data.ErrUnavailable", err)
	}
	s := openStore(t, Options{Endpoint: fakeS3(t, nil)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, data.NewChunkID(), []byte("x")); err == nil || errors.Is(err, data.ErrUnavailable) {
		t.Errorf("Put cancelled by its caller: %v; want an error other than data.ErrUnavailable", err)
	}
}

// A missing bucket fails Open, and is never taken for a missing chunk.
func TestMissingBucket(t *testing.T) {
	_, err := Open(context.Background(), Options{Bucket: "nope", Endpoint: fakeS3(t, nil), Credentials: testCreds})
	if err == nil || !strings.Contains(err.Error(), "s3://nope/") || !strings.Contains(err.Error(), "NoSuchBucket") || errors.Is(err, data.ErrUnavailable) {
		t.Fatalf("Open of a missing bucket: %v", err)
	}
}

// No more requests than the concurrency bound reach the remote at once,
// whatever the number of callers.
func TestConcurrencyBound(t *testing.T) {
	var now, most atomic.Int32
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond) // let the callers pile up
			h.ServeHTTP(w, r)
			now.Add(-1)
		})
	}
	s := openStore(t, Options{Endpoint: fakeS3(t, slow), Concurrency: 3})
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			if err := s.Put(context.Background(), data.NewChunkID(), storetest.Random(uint64(i), 100)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 3 {
		t.Fatalf("%d requests at once at the remote, want 3 (the bound, reached by 24 callers)", m)
	}
}

// A chunk read in order in small pieces is fetched a window at a time;
// reads here and there fetch what they ask for; what Delete removed reads
// as missing, window or not.
func TestReadAhead(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var gets []string // the Range of every GET
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
				mu.Lock()
				gets = append(gets, r.Header.Get("Range"))
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		g := gets
		gets = nil
		return g
	}
	const win, size = 1 << 20, 5<<19 + 100 // a chunk of 2.5 MiB and 100 bytes
	s := openStore(t, Options{Endpoint: fakeS3(t, count), ReadAhead: win})
	want := storetest.Random(1, size)
	id := data.NewChunkID()
	if err := s.Put(ctx, id, want); err != nil {
		t.Fatal(err)
	}

	// In order, 256 KiB at a time, as the kernel's read-ahead asks, four
	// reads at once: three windows, the last one short.
	got := make([]byte, size)
	var wg sync.WaitGroup
	for off := 0; off < size; off += 4 << 18 {
		for i := range 4 {
			at := off + i<<18
			if at >= size {
				break
			}
			wg.Go(func() {
				p := got[at:min(at+1<<18, size)]
				if n, err := s.ReadAt(ctx, id, p, int64(at)); n != len(p) || err != nil && err != io.EOF {
					t.Errorf("ReadAt(%d bytes at %d) = %d, %v", len(p), at, n, err)
				}
			})
		}
		wg.Wait()
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read in order: wrong bytes")
	}
	if g := taken(); !slices.Equal(g, []string{"bytes=0-1048575", "bytes=1048576-2097151", "bytes=2097152-3145727"}) {
		t.Fatalf("read in order with GETs %q, want one per window", g)
	}
	// Past the end, and across two windows already fetched: no GET.
	p := make([]byte, 1<<18)
	if n, err := s.ReadAt(ctx, id, p, size-100); n != 100 || err != io.EOF || !bytes.Equal(p[:n], want[size-100:]) {
		t.Fatalf("ReadAt across the end = %d, %v", n, err)
	}
	if n, err := s.ReadAt(ctx, id, p, win-10); n != len(p) || err != nil || !bytes.Equal(p, want[win-10:win-10+len(p)]) {
		t.Fatalf("ReadAt across windows = %d, %v", n, err)
	}
	if g := taken(); len(g) != 0 {
		t.Fatalf("reads within fetched windows made GETs %q", g)
	}

	// Here and there, in another chunk, past its first window and never
	// next to an earlier read: each read fetches its own bytes.
	other := data.NewChunkID()
	if err := s.Put(ctx, other, want); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{2<<20 + 777, 1<<20 + 12345} {
		if n, err := s.ReadAt(ctx, other, p[:4096], int64(off)); n != 4096 || err != nil || !bytes.Equal(p[:n], want[off:off+4096]) {
			t.Fatalf("ReadAt(4096 at %d) = %d, %v", off, n, err)
		}
	}
	if g := taken(); !slices.Equal(g, []string{"bytes=2097929-2102024", "bytes=1060921-1065016"}) {
		t.Fatalf("reads here and there made GETs %q, want one of 4 KiB each", g)
	}

	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(ctx, id, p, 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("ReadAt after Delete: %v, want ErrNoSuchChunk", err)
	}
}

// BenchmarkReadInOrder reads an 8 MiB chunk in order in 512 KiB pieces,
// as the mount does, from a remote that takes 2 ms to answer, with and
// without read-ahead: compare the two in one run.
func BenchmarkReadInOrder(b *testing.B) {
	rtt := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(2 * time.Millisecond)
			h.ServeHTTP(w, r)
		})
	}
	url := fakeS3(b, rtt)
	chunk := storetest.Random(1, 8<<20)
	for _, c := range []struct {
		name string
		ra   int
	}{{"none", -1}, {"window", 0}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(context.Background(), Options{Bucket: testBucket, Endpoint: url, Credentials: testCreds, ReadAhead: c.ra})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := make([]byte, 512<<10)
			b.SetBytes(int64(len(chunk)))
			for range b.N {
				b.StopTimer()
				id := data.NewChunkID() // a new chunk each time: no window left over
				if err := s.Put(context.Background(), id, chunk); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for off := 0; off < len(chunk); off += len(p) {
					if _, err := s.ReadAt(context.Background(), id, p, int64(off)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
