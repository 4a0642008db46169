package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/data/storetest"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3/sigv4"
)

const (
	testAccessKey = "SFTESTROOT0000000001"
	testSecretKey = "test/secret+0123456789abcdefghijklmnopqrs"
	testChunk     = 64 << 10
)

// getFixture is an endpoint over a local chunk store holding one object,
// bkt/k: a chunk of data, a chunk of zeros (stored as a hole), a chunk of
// data and a short last chunk.
type getFixture struct {
	h    *Handler
	svc  *object.Service
	ds   *local.Store
	body []byte
}

func newGetFixture(t *testing.T) *getFixture {
	t.Helper()
	ctx := context.Background()
	ds, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := object.New(mem.New(), ds, object.Options{ChunkSize: testChunk})
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	body := storetest.Random(1, 3*testChunk+100)
	clear(body[testChunk : 2*testChunk])
	if _, err := svc.Put(ctx, "bkt", "k", bytes.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	h := New(svc, Config{
		Keys:          sigv4.StaticKeys{testAccessKey: testSecretKey},
		RootAccessKey: testAccessKey,
		Logger:        slog.New(slog.DiscardHandler),
	})
	return &getFixture{h: h, svc: svc, ds: ds, body: body}
}

// signedGet returns a signed GET of url with the given headers.
func signedGet(t testing.TB, url string, header map[string]string) *http.Request {
	t.Helper()
	return signed(t, http.MethodGet, url, nil, header)
}

// signed returns a signed request; its body, if any, is sent as
// UNSIGNED-PAYLOAD.
func signed(t testing.TB, method, url string, body io.Reader, header map[string]string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	empty := sha256.Sum256(nil)
	payload := hex.EncodeToString(empty[:])
	if body != nil {
		payload = sigv4.UnsignedPayload
	}
	r.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, payload, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// fileRecorder is a ResponseRecorder with a ReadFrom, as net/http's
// response has, that counts the limited readers of files it is given:
// those net/http sends with sendfile.
type fileRecorder struct {
	*httptest.ResponseRecorder
	files int
}

func (w *fileRecorder) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			w.files++
		}
	}
	return io.Copy(w.ResponseRecorder, r)
}

// A GetObject of local chunks reaches the ResponseWriter's ReadFrom with
// the chunk files, one per stored chunk read; holes are sent as zeros.
func TestGetObjectSendsChunkFiles(t *testing.T) {
	f := newGetFixture(t)
	w := &fileRecorder{ResponseRecorder: httptest.NewRecorder()}
	f.h.ServeHTTP(w, signedGet(t, "http://127.0.0.1/bkt/k", nil))
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), f.body) {
		t.Fatalf("GET: %d, %d bytes: %s", w.Code, w.Body.Len(), w.Body.Bytes()[:min(w.Body.Len(), 200)])
	}
	if w.files != 3 {
		t.Fatalf("ReadFrom got %d chunk files, want 3", w.files)
	}
}

// Over TCP, where net/http sends files with sendfile, every range reads
// back exactly, and a chunk gone before it is sent cuts the response short
// of its Content-Length: the client sees an error, never a short success.
func TestGetObjectOverTCP(t *testing.T) {
	f := newGetFixture(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	get := func(header map[string]string, query string) (*http.Response, []byte, error) {
		resp, err := srv.Client().Do(signedGet(t, srv.URL+"/bkt/k"+query, header))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	size := len(f.body)
	for _, tt := range []struct {
		rng        string
		query      string
		off, end   int
		wantStatus int
	}{
		{"", "", 0, size, http.StatusOK},
		{"bytes=0-0", "", 0, 1, http.StatusPartialContent},
		{"bytes=65000-140000", "", 65000, 140001, http.StatusPartialContent}, // data, hole, data
		{"bytes=70000-80000", "", 70000, 80001, http.StatusPartialContent},   // in the hole
		{"bytes=131072-196607", "", 131072, 196608, http.StatusPartialContent},
		{"bytes=-150", "", size - 150, size, http.StatusPartialContent},
		{"", "?partNumber=1", 0, size, http.StatusPartialContent},
	} {
		h := map[string]string{}
		if tt.rng != "" {
			h["Range"] = tt.rng
		}
		resp, b, err := get(h, tt.query)
		if err != nil || resp.StatusCode != tt.wantStatus || !bytes.Equal(b, f.body[tt.off:tt.end]) {
			t.Fatalf("GET %q%s: %d, %d bytes, %v; want %d, bytes [%d, %d)", tt.rng, tt.query, resp.StatusCode, len(b), err,
				tt.wantStatus, tt.off, tt.end)
		}
	}
	v, err := f.svc.Head(context.Background(), "bkt", "k", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ds.Delete(context.Background(), data.ChunkID(m.Chunks[2].Id)); err != nil {
		t.Fatal(err)
	}
	resp, b, err := get(nil, "")
	if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) || len(b) >= size || !bytes.Equal(b, f.body[:len(b)]) {
		t.Fatalf("GET with a chunk gone: %d, %d bytes, %v; want 200 cut short (unexpected EOF)", resp.StatusCode, len(b), err)
	}
}

// BenchmarkSmallObject measures the handler's own work for a 4 KiB
// object (stored inline in its row, on the in-memory meta store), without
// a network: the cost the HTTP layer and SigV4 add to the core's.
func BenchmarkSmallObject(b *testing.B) {
	ctx := context.Background()
	ds, err := local.Open(b.TempDir(), local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc := object.New(mem.New(), ds, object.Options{})
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		b.Fatal(err)
	}
	h := New(svc, Config{
		Keys:          sigv4.StaticKeys{testAccessKey: testSecretKey},
		RootAccessKey: testAccessKey,
		Logger:        slog.New(slog.DiscardHandler),
	})
	body := storetest.Random(1, 4<<10)
	if _, err := svc.Put(ctx, "bkt", "k", bytes.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey}
	put := func() *http.Request {
		r := httptest.NewRequest(http.MethodPut, "http://127.0.0.1/bkt/k", bytes.NewReader(body))
		r.Header.Set("X-Amz-Content-Sha256", payload)
		if err := v4.NewSigner().SignHTTP(ctx, creds, r, payload, "s3", "us-east-1", time.Now()); err != nil {
			b.Fatal(err)
		}
		return r
	}
	// The signed requests are sent again and again: a signature is valid
	// for minutes, and the body is the same.
	b.Run("PUT", func(b *testing.B) {
		r := put()
		for b.Loop() {
			r.Body = io.NopCloser(bytes.NewReader(body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("PUT: %d %s", w.Code, w.Body)
			}
		}
	})
	b.Run("GET", func(b *testing.B) {
		r := signedGet(b, "http://127.0.0.1/bkt/k", nil)
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Body.Len() != len(body) {
				b.Fatalf("GET: %d %s", w.Code, w.Body)
			}
		}
	})
}
