package sigv4

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20261202/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32))
	f.Add("AWS4-HMAC-SHA256 Signature=" + strings.Repeat("0", 64) + ",Credential=a/20260101/r/s3/aws4_request,SignedHeaders=host")
	f.Add("AWS AKID:sig")
	f.Add("AWS4-HMAC-SHA256 Credential=,,=,")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseAuthorization(h)
		if err != nil {
			return
		}
		// Whatever parses is complete and well formed.
		if len(a.signature) != 32 || len(a.signedHeaders) == 0 || a.cred.accessKey == "" ||
			a.cred.region == "" || a.cred.service == "" || len(a.cred.date) != 8 {
			t.Fatalf("parsed %q into incomplete %+v", h, a)
		}
		for _, n := range a.signedHeaders {
			if n == "" || n != strings.ToLower(n) {
				t.Fatalf("parsed %q: signed header %q", h, n)
			}
		}
	})
}

// FuzzChunked feeds arbitrary framing to the decoder: it must never panic,
// never yield more than the declared length, and yield exactly that much
// when it reports success.
func FuzzChunked(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n"), int64(5))
	f.Add([]byte("0\r\n\r\n"), int64(0))
	f.Add([]byte("3;chunk-signature=00\r\nabc\r\n0\r\n\r\n"), int64(3))
	f.Add([]byte("fffffffffffffff\r\n"), int64(1<<40))
	f.Fuzz(func(t *testing.T, body []byte, declared int64) {
		if declared < 0 {
			declared = -declared
		}
		c := newChunkedReader(bytes.NewReader(body), declared, nil, []string{"x-amz-checksum-crc32"}, false)
		out, err := io.ReadAll(io.LimitReader(c, declared+1))
		if int64(len(out)) > declared {
			t.Fatalf("decoded %d bytes, declared %d", len(out), declared)
		}
		if err == nil && int64(len(out)) != declared {
			t.Fatalf("success with %d bytes, declared %d", len(out), declared)
		}
	})
}

// FuzzChunkedRoundTrip frames data in chunks of n bytes the way clients do
// and checks that it decodes to the same bytes.
func FuzzChunkedRoundTrip(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(5))
	f.Add([]byte{}, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		if n == 0 {
			n = 1
		}
		var b bytes.Buffer
		for off := 0; off < len(data); off += int(n) {
			chunk := data[off:min(off+int(n), len(data))]
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		b.WriteString("0\r\n\r\n")
		out, err := io.ReadAll(newChunkedReader(&b, int64(len(data)), nil, nil, false))
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("decoded %q, %v; want %q", out, err, data)
		}
	})
}
