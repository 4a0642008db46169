package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS SDK's client-side signer is the independent reference: every
// request below is signed by it (or, for trailer signatures it lacks, by
// the published algorithm written out in the test) and verified by ours.

const (
	testKey    = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testRegion = "us-east-1"
)

var testCreds = aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}

// sentinels names every error Verify and Body may fail with, so that the
// test server can report which one matched.
var sentinels = map[string]error{
	"MissingAuth": ErrMissingAuth, "UnsupportedAuth": ErrUnsupportedAuth, "MultipleAuth": ErrMultipleAuth,
	"MalformedHeader": ErrMalformedHeader, "MalformedQuery": ErrMalformedQuery,
	"MissingSecurityHeader": ErrMissingSecurityHeader, "UnknownAccessKey": ErrUnknownAccessKey,
	"SignatureMismatch": ErrSignatureMismatch, "UnsignedHeaders": ErrUnsignedHeaders,
	"TimeSkewed": ErrTimeSkewed, "Expired": ErrExpired, "InvalidPayloadHash": ErrInvalidPayloadHash,
	"PayloadHashMismatch": ErrPayloadHashMismatch, "MissingDecodedLength": ErrMissingDecodedLength,
	"MalformedChunk": ErrMalformedChunk, "MalformedTrailer": ErrMalformedTrailer,
	"DecodedLength": ErrDecodedLength, "UnexpectedEOF": io.ErrUnexpectedEOF,
}

func errName(err error) string {
	for name, s := range sentinels {
		if errors.Is(err, s) {
			return name
		}
	}
	return "other: " + err.Error()
}

// verifyServer answers "OK <body>" when a request verifies and its body
// reads cleanly, else "ERR <sentinel name>". Trailers come back as
// X-Got-<name> headers.
func verifyServer(t *testing.T, now time.Time) *httptest.Server {
	t.Helper()
	v := &Verifier{Region: testRegion, Keys: StaticKeys{testKey: testSecret}, Now: func() time.Time { return now }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := v.Verify(r)
		if err == nil {
			var body []byte
			body, err = io.ReadAll(req.Body)
			if err == nil {
				for _, name := range []string{"x-amz-checksum-crc32", "x-amz-checksum-sha256"} {
					if val, ok := req.Trailer(name); ok {
						w.Header().Set("X-Got-"+name, val)
					}
				}
				fmt.Fprintf(w, "OK %s", body)
				return
			}
		}
		fmt.Fprintf(w, "ERR %s", errName(err))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, r *http.Request) (string, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.Header
}

func newRequest(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		r.Body, r.ContentLength = http.NoBody, 0
	}
	return r
}

// sign signs r as an S3 client does: x-amz-content-sha256 set and signed,
// the path signed as sent.
func sign(t *testing.T, r *http.Request, payload string, at time.Time, creds aws.Credentials) {
	t.Helper()
	r.Header.Set("X-Amz-Content-Sha256", payload)
	err := v4.NewSigner().SignHTTP(context.Background(), creds, r, payload, "s3", testRegion, at,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

var now = time.Date(2026, 12, 2, 13, 40, 0, 0, time.UTC)

func TestHeaderAuth(t *testing.T) {
	srv := verifyServer(t, now)
	body := []byte("hello, world")
	wrong := aws.Credentials{AccessKeyID: testKey, SecretAccessKey: "not the secret"}
	unknown := aws.Credentials{AccessKeyID: "AKIDUNKNOWN", SecretAccessKey: testSecret}
	tests := []struct {
		name    string
		path    string
		body    []byte
		payload string
		at      time.Time
		creds   aws.Credentials
		after   func(r *http.Request) // tampering after signing
		want    string
	}{
		{name: "get", path: "/bucket/key", want: "OK "},
		{name: "odd key and query", path: "/b/a%20b%2Bc/%C3%BC/%25x/~!%27%28%29*?prefix=a%20b&delimiter=%2F&versions", want: "OK "},
		{name: "strictly escaped key", path: "/b/%21%2A%3D%27", want: "OK "},
		{name: "double slashes and dots", path: "/b//x/./../y", want: "OK "},
		{name: "signed body", path: "/b/k", body: body, payload: hashHex(body), want: "OK hello, world"},
		{name: "unsigned body", path: "/b/k", body: body, payload: UnsignedPayload, want: "OK hello, world"},
		{name: "body not matching its hash", path: "/b/k", body: body, payload: hashHex([]byte("other")), want: "ERR PayloadHashMismatch"},
		{name: "bad payload mode", path: "/b/k", body: body, payload: "SOMETHING", want: "ERR InvalidPayloadHash"},
		{name: "wrong secret", path: "/b/k", creds: wrong, want: "ERR SignatureMismatch"},
		{name: "unknown key", path: "/b/k", creds: unknown, want: "ERR UnknownAccessKey"},
		{name: "skewed 16m early", path: "/b/k", at: now.Add(-16 * time.Minute), want: "ERR TimeSkewed"},
		{name: "skewed 16m late", path: "/b/k", at: now.Add(16 * time.Minute), want: "ERR TimeSkewed"},
		{name: "skew within 14m", path: "/b/k", at: now.Add(-14 * time.Minute), want: "OK "},
		{name: "path changed", path: "/b/k", after: func(r *http.Request) { r.URL.Path = "/b/other" }, want: "ERR SignatureMismatch"},
		{name: "query added", path: "/b/k", after: func(r *http.Request) { r.URL.RawQuery = "versionId=null" }, want: "ERR SignatureMismatch"},
		{name: "method changed", path: "/b/k", after: func(r *http.Request) { r.Method = http.MethodDelete }, want: "ERR SignatureMismatch"},
		{name: "unsigned amz header", path: "/b/k", after: func(r *http.Request) { r.Header.Set("X-Amz-Meta-Evil", "1") }, want: "ERR UnsignedHeaders"},
		{name: "payload mode swapped", path: "/b/k", body: body, payload: hashHex(body),
			after: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload) }, want: "ERR SignatureMismatch"},
		{name: "no content sha", path: "/b/k", after: func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }, want: "ERR MissingSecurityHeader"},
		{name: "no date", path: "/b/k", after: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: "ERR MissingSecurityHeader"},
		{name: "no auth", path: "/b/k", after: func(r *http.Request) { r.Header.Del("Authorization") }, want: "ERR MissingAuth"},
		{name: "sigv2", path: "/b/k", after: func(r *http.Request) { r.Header.Set("Authorization", "AWS AKID:c2lnbmF0dXJl") }, want: "ERR UnsupportedAuth"},
		{name: "header and query", path: "/b/k", after: func(r *http.Request) { r.URL.RawQuery = "X-Amz-Signature=00" }, want: "ERR MultipleAuth"},
		{name: "wrong region", path: "/b/k", after: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testRegion, "eu-west-1", 1))
		}, want: "ERR MalformedHeader"},
		{name: "garbled header", path: "/b/k", after: func(r *http.Request) {
			r.Header.Set("Authorization", Algorithm+" Credential=x, Signature=zz")
		}, want: "ERR MalformedHeader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(t, http.MethodPut, srv.URL+tt.path, tt.body)
			if tt.payload == "" {
				tt.payload = hashHex(tt.body)
			}
			if tt.at.IsZero() {
				tt.at = now
			}
			if tt.creds.AccessKeyID == "" {
				tt.creds = testCreds
			}
			sign(t, r, tt.payload, tt.at, tt.creds)
			if tt.after != nil {
				tt.after(r)
			}
			if got, _ := do(t, r); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPresigned(t *testing.T) {
	srv := verifyServer(t, now)
	presign := func(t *testing.T, path string, at time.Time, expires string) string {
		t.Helper()
		r := newRequest(t, http.MethodGet, srv.URL+path, nil)
		q := r.URL.Query()
		q.Set("X-Amz-Expires", expires)
		r.URL.RawQuery = q.Encode()
		u, _, err := v4.NewSigner().PresignHTTP(context.Background(), testCreds, r, UnsignedPayload, "s3", testRegion, at,
			func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	get := func(t *testing.T, u string) string {
		got, _ := do(t, newRequest(t, http.MethodGet, u, nil))
		return got
	}
	tests := []struct {
		name    string
		at      time.Time
		expires string
		edit    func(string) string
		want    string
	}{
		{name: "valid", at: now.Add(-time.Hour), expires: "3601", want: "OK "},
		{name: "expired", at: now.Add(-time.Hour), expires: "3599", want: "ERR Expired"},
		{name: "not valid yet", at: now.Add(20 * time.Minute), expires: "3600", want: "ERR Expired"},
		{name: "expiry over 7 days", at: now, expires: "604801", want: "ERR MalformedQuery"},
		{name: "seven days", at: now.Add(-6 * 24 * time.Hour), expires: "604800", want: "OK "},
		{name: "expiry raised", at: now.Add(-time.Hour), expires: "60",
			edit: func(u string) string { return strings.Replace(u, "X-Amz-Expires=60", "X-Amz-Expires=7200", 1) }, want: "ERR SignatureMismatch"},
		{name: "parameter added", at: now, expires: "60",
			edit: func(u string) string { return u + "&versionId=null" }, want: "ERR SignatureMismatch"},
		{name: "signature dropped", at: now, expires: "60",
			edit: func(u string) string { return u[:strings.Index(u, "&X-Amz-Signature")] }, want: "ERR MalformedQuery"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := presign(t, "/bucket/some%20key", tt.at, tt.expires)
			if tt.edit != nil {
				u = tt.edit(u)
			}
			if got := get(t, u); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// chunkedBody frames data as a signed aws-chunked body, chunks of size n,
// with chunk signatures from the SDK's stream signer seeded by seed.
func chunkedBody(t *testing.T, data []byte, n int, seed string, at time.Time, trailer string) []byte {
	t.Helper()
	seedSig, err := hex.DecodeString(seed)
	if err != nil {
		t.Fatal(err)
	}
	ss := v4.NewStreamSigner(testCreds, "s3", testRegion, seedSig)
	var b bytes.Buffer
	var prev []byte
	for off := 0; ; off += n {
		chunk := data[min(off, len(data)):min(off+n, len(data))]
		sig, err := ss.GetSignature(context.Background(), nil, chunk, at)
		if err != nil {
			t.Fatal(err)
		}
		prev = sig
		fmt.Fprintf(&b, "%x;chunk-signature=%x\r\n", len(chunk), sig)
		if len(chunk) == 0 {
			break
		}
		b.Write(chunk)
		b.WriteString("\r\n")
	}
	if trailer != "" {
		// The trailer signature, per the published algorithm: it chains
		// from the final chunk's and covers "name:value\n".
		scope := at.Format(dateFormat) + "/" + testRegion + "/s3/aws4_request"
		sts := "AWS4-HMAC-SHA256-TRAILER\n" + at.Format(timeFormat) + "\n" + scope + "\n" +
			hex.EncodeToString(prev) + "\n" + hashHex([]byte(trailer+"\n"))
		key := signingKey(testSecret, credential{date: at.Format(dateFormat), region: testRegion, service: "s3"})
		fmt.Fprintf(&b, "%s\r\nx-amz-trailer-signature:%x\r\n", trailer, hmacSHA256(key, sts))
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// seedSignature returns the request signature an Authorization header
// carries.
func seedSignature(r *http.Request) string {
	h := r.Header.Get("Authorization")
	return h[strings.LastIndex(h, "=")+1:]
}

func TestStreamingSigned(t *testing.T) {
	srv := verifyServer(t, now)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes
	const crc = "x-amz-checksum-crc32:AAAAAA=="
	tests := []struct {
		name     string
		mode     string
		chunk    int
		trailer  string
		declared int
		edit     func([]byte) []byte
		want     string
	}{
		{name: "chunks", mode: StreamingPayload, chunk: 4096, want: "OK " + string(data)},
		{name: "one chunk", mode: StreamingPayload, chunk: 1 << 20, want: "OK " + string(data)},
		{name: "with trailer", mode: StreamingPayloadTrailer, chunk: 8192, trailer: crc, want: "OK " + string(data)},
		{name: "chunk data flipped", mode: StreamingPayload, chunk: 4096,
			edit: func(b []byte) []byte { b[200] ^= 1; return b }, want: "ERR SignatureMismatch"},
		{name: "truncated", mode: StreamingPayload, chunk: 4096,
			edit: func(b []byte) []byte { return b[:9000] }, want: "ERR UnexpectedEOF"},
		{name: "final chunk dropped", mode: StreamingPayload, chunk: 4096,
			edit: func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("0;chunk"))] }, want: "ERR UnexpectedEOF"},
		{name: "declared too long", mode: StreamingPayload, chunk: 4096, declared: len(data) + 1, want: "ERR DecodedLength"},
		{name: "declared too short", mode: StreamingPayload, chunk: 4096, declared: len(data) - 1, want: "ERR DecodedLength"},
		{name: "trailer changed", mode: StreamingPayloadTrailer, chunk: 8192, trailer: crc,
			edit: func(b []byte) []byte { return bytes.Replace(b, []byte("AAAAAA=="), []byte("AAAAAB=="), 1) }, want: "ERR SignatureMismatch"},
		{name: "trailer signature missing", mode: StreamingPayloadTrailer, chunk: 8192, trailer: crc,
			edit: func(b []byte) []byte {
				return append(b[:bytes.Index(b, []byte("x-amz-trailer-signature"))], "\r\n"...)
			}, want: "ERR MalformedTrailer"},
		{name: "garbage size", mode: StreamingPayload, chunk: 4096,
			edit: func(b []byte) []byte { return append([]byte("zz"), b[4:]...) }, want: "ERR MalformedChunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(t, http.MethodPut, srv.URL+"/b/k", nil)
			declared := len(data)
			if tt.declared != 0 {
				declared = tt.declared
			}
			r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(declared))
			r.Header.Set("Content-Encoding", "aws-chunked")
			if tt.trailer != "" {
				r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
			}
			sign(t, r, tt.mode, now, testCreds)
			body := chunkedBody(t, data, tt.chunk, seedSignature(r), now, tt.trailer)
			if tt.edit != nil {
				body = tt.edit(body)
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			got, h := do(t, r)
			if got != tt.want {
				t.Errorf("got %.40q…, want %.40q…", got, tt.want)
			}
			if tt.trailer != "" && strings.HasPrefix(tt.want, "OK") && h.Get("X-Got-x-amz-checksum-crc32") != "AAAAAA==" {
				t.Errorf("trailer: got %q", h.Get("X-Got-x-amz-checksum-crc32"))
			}
		})
	}
}

func TestStreamingUnsignedTrailer(t *testing.T) {
	srv := verifyServer(t, now)
	tests := []struct {
		name, body string
		declared   int
		want       string
	}{
		{name: "as the SDK sends it", body: "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n", declared: 11, want: "OK hello world"},
		{name: "empty", body: "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", declared: 0, want: "OK "},
		{name: "declared trailer missing", body: "5\r\nhello\r\n0\r\n\r\n", declared: 5, want: "ERR MalformedTrailer"},
		{name: "undeclared trailer", body: "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\nx-evil:1\r\n\r\n", declared: 5, want: "ERR MalformedTrailer"},
		{name: "no CRLF after data", body: "5\r\nhelloXX0\r\n\r\n", declared: 5, want: "ERR MalformedChunk"},
		{name: "bare LF", body: "5\nhello\r\n0\r\n\r\n", declared: 5, want: "ERR MalformedChunk"},
		{name: "negative size", body: "-5\r\nhello\r\n0\r\n\r\n", declared: 5, want: "ERR MalformedChunk"},
		{name: "chunk beyond declared", body: "ffffffffff\r\nhello", declared: 5, want: "ERR DecodedLength"},
		{name: "cut in the trailer", body: "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUo", declared: 5, want: "ERR UnexpectedEOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(t, http.MethodPut, srv.URL+"/b/k", []byte(tt.body))
			r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(tt.declared))
			r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
			sign(t, r, StreamingUnsignedTrailer, now, testCreds)
			if got, _ := do(t, r); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMissingDecodedLength(t *testing.T) {
	srv := verifyServer(t, now)
	r := newRequest(t, http.MethodPut, srv.URL+"/b/k", []byte("0\r\n\r\n"))
	sign(t, r, StreamingUnsignedTrailer, now, testCreds)
	if got, _ := do(t, r); got != "ERR MissingDecodedLength" {
		t.Errorf("got %q", got)
	}
}

// TestKeyNamedLikeAuth checks that only query parameters make a request
// presigned: a key that merely contains X-Amz-* names is not mistaken for
// one.
func TestKeyNamedLikeAuth(t *testing.T) {
	srv := verifyServer(t, now)
	r := newRequest(t, http.MethodGet, srv.URL+"/b/X-Amz-Signature="+url.PathEscape("x"), nil)
	sign(t, r, emptySHA256, now, testCreds)
	if got, _ := do(t, r); got != "OK " {
		t.Errorf("got %q", got)
	}
}

// The derived signing keys are remembered by secret: once a key's secret
// changes, requests signed with the old one fail, and with the new one
// pass. The cache stays within its bound.
func TestDerivedKeys(t *testing.T) {
	keys := StaticKeys{testKey: testSecret}
	v := &Verifier{Region: testRegion, Keys: keys, Now: func() time.Time { return now }}
	verify := func(secret string) error {
		r := newRequest(t, http.MethodGet, "http://example.com/bucket/key", nil)
		sign(t, r, hashHex(nil), now, aws.Credentials{AccessKeyID: testKey, SecretAccessKey: secret})
		_, err := v.Verify(r)
		return err
	}
	if err := verify(testSecret); err != nil {
		t.Fatal(err)
	}
	keys[testKey] = "another/secret+0123456789abcdefghijklmnop"
	if err := verify(testSecret); !errors.Is(err, ErrSignatureMismatch) {
		t.Fatalf("old secret after the change: %v, want SignatureMismatch", err)
	}
	if err := verify(keys[testKey]); err != nil {
		t.Fatalf("new secret: %v", err)
	}
	for i := range 2 * maxDerivedKeys {
		v.derived.key(fmt.Sprint(i), credential{date: "20261202", region: testRegion, service: "s3"})
	}
	if n := len(v.derived.keys); n > maxDerivedKeys {
		t.Fatalf("%d derived keys cached, want at most %d", n, maxDerivedKeys)
	}
}
