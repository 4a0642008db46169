package s3

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		h         string
		size      int64
		off, n    int64
		ok, unsat bool
	}{
		{"", 10, 0, 0, false, false},
		{"bytes=0-0", 10, 0, 1, true, false},
		{"bytes=2-5", 10, 2, 4, true, false},
		{"bytes=2-", 10, 2, 8, true, false},
		{"bytes=8-100", 10, 8, 2, true, false},
		{"bytes=-3", 10, 7, 3, true, false},
		{"bytes=-30", 10, 0, 10, true, false},
		{"bytes=10-", 10, 0, 0, false, true},
		{"bytes=-0", 10, 0, 0, false, true},
		{"bytes=0-", 0, 0, 0, false, true},
		{"bytes=-1", 0, 0, 0, false, true},
		{"bytes=5-2", 10, 0, 0, false, false},     // malformed: ignored
		{"bytes=0-1,3-4", 10, 0, 0, false, false}, // several ranges: ignored
		{"bytes=x-1", 10, 0, 0, false, false},
		{"bytes=-+1", 10, 0, 0, false, false},
		{"items=0-1", 10, 0, 0, false, false},
	}
	for _, tt := range tests {
		off, n, ok, err := parseRange(tt.h, tt.size)
		if off != tt.off || n != tt.n || ok != tt.ok || (err != nil) != tt.unsat {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v, %v; want %d, %d, %v, unsatisfiable %v",
				tt.h, tt.size, off, n, ok, err, tt.off, tt.n, tt.ok, tt.unsat)
		}
	}
}

func TestPreconditions(t *testing.T) {
	// AsOf, not NewVersionID: ids issued in this process (by other tests)
	// are later, and NewVersionID never issues one earlier.
	v := &meta.Version{ETag: "abc", ID: meta.AsOf(time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC))}
	tests := []struct {
		h    map[string]string
		want int
	}{
		{map[string]string{}, 0},
		{map[string]string{"If-Match": `"abc"`}, 0},
		{map[string]string{"If-Match": `"x", W/"abc"`}, 0},
		{map[string]string{"If-Match": `*`}, 0},
		{map[string]string{"If-Match": `"x"`}, 412},
		{map[string]string{"If-None-Match": `"abc"`}, 304},
		{map[string]string{"If-None-Match": `*`}, 304},
		{map[string]string{"If-None-Match": `"x"`}, 0},
		{map[string]string{"If-Modified-Since": "Fri, 02 Jan 2026 03:04:05 GMT"}, 304},
		{map[string]string{"If-Modified-Since": "Fri, 02 Jan 2026 03:04:04 GMT"}, 0},
		{map[string]string{"If-Unmodified-Since": "Fri, 02 Jan 2026 03:04:05 GMT"}, 0},
		{map[string]string{"If-Unmodified-Since": "Fri, 02 Jan 2026 03:04:04 GMT"}, 412},
		{map[string]string{"If-Unmodified-Since": "garbage"}, 0},
		{map[string]string{"If-Match": `"abc"`, "If-Unmodified-Since": "Thu, 01 Jan 2026 00:00:00 GMT"}, 0},
		{map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": "Sat, 03 Jan 2026 00:00:00 GMT"}, 0},
		{map[string]string{"If-Match": `"x"`, "If-None-Match": `"abc"`}, 412},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, val := range tt.h {
			h.Set("X-Amz-Copy-Source-"+k, val)
		}
		if got := readPreconditions(h, "X-Amz-Copy-Source-").evaluate(v); got != tt.want {
			t.Errorf("%v: got %d, want %d", tt.h, got, tt.want)
		}
	}
}

func TestWriteCondition(t *testing.T) {
	live := &meta.Version{ETag: "abc"}
	marker := &meta.Version{DeleteMarker: true}
	tests := []struct {
		noneMatch, match string
		head             *meta.Version
		want             error
	}{
		{"*", "", nil, nil},
		{"*", "", marker, nil},
		{"*", "", live, errPreconditionFailed},
		{"", `"abc"`, live, nil},
		{"", `"x"`, live, errPreconditionFailed},
		{"", `"abc"`, nil, errNoSuchKey},
		{"", `"abc"`, marker, errNoSuchKey},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.noneMatch != "" {
			h.Set("If-None-Match", tt.noneMatch)
		}
		if tt.match != "" {
			h.Set("If-Match", tt.match)
		}
		check, err := writeCondition(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := check(tt.head); got != tt.want {
			t.Errorf("If-None-Match %q If-Match %q on %+v: got %v, want %v", tt.noneMatch, tt.match, tt.head, got, tt.want)
		}
	}
}

func TestParseCopySource(t *testing.T) {
	tests := []struct {
		in, bucket, key, version string
		ok                       bool
	}{
		{"b/k", "b", "k", "", true},
		{"/b/dir/a%20b%2Bc", "b", "dir/a b+c", "", true},
		{"b/k?versionId=null", "b", "k", "null", true},
		{"b/k%3FversionId=1", "b", "k?versionId=1", "", true},
		{"b", "", "", "", false},
		{"/b/", "", "", "", false},
		{"b/k?versionId=", "", "", "", false},
		{"b/k?other=1", "", "", "", false},
		{"b/%zz", "", "", "", false},
	}
	for _, tt := range tests {
		b, k, v, err := parseCopySource(tt.in)
		if (err == nil) != tt.ok || b != tt.bucket || k != tt.key || v != tt.version {
			t.Errorf("parseCopySource(%q) = %q, %q, %q, %v", tt.in, b, k, v, err)
		}
	}
}

func TestChecksumAlgorithms(t *testing.T) {
	// Check values of "123456789" from the CRC catalogue, and the SHAs.
	want := map[string]string{
		"CRC32":     "cbf43926",
		"CRC32C":    "e3069283",
		"CRC64NVME": "ae8b14860a799888",
		"SHA1":      "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
		"SHA256":    "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
	}
	for _, a := range checksumAlgs {
		h := a.new()
		h.Write([]byte("123456789"))
		sum := h.Sum(nil)
		if got := base64.StdEncoding.EncodeToString(sum); len(sum) != a.size {
			t.Errorf("%s: %d bytes (%s), want %d", a.name, len(sum), got, a.size)
		}
		if got := hex.EncodeToString(sum); got != want[a.name] {
			t.Errorf("%s(123456789) = %s, want %s", a.name, got, want[a.name])
		}
	}
}

func TestContentEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "aws-chunked": "", "aws-chunked,gzip": "gzip", "gzip, AWS-CHUNKED , br": "gzip,br",
	} {
		h := http.Header{}
		h.Set("Content-Encoding", in)
		if got := contentEncoding(h); got != want {
			t.Errorf("contentEncoding(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCredentialsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials")
	c, created, err := LoadOrCreateCredentials(path)
	if err != nil || !created || len(c.AccessKey) != 20 || len(c.SecretKey) != 40 {
		t.Fatalf("first start: %+v, created %v, %v", c, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, %v", fi.Mode(), err)
	}
	again, created, err := LoadOrCreateCredentials(path)
	if err != nil || created || again != c {
		t.Fatalf("second start: %+v, created %v, %v; want %+v", again, created, err, c)
	}
	if err := os.WriteFile(path, []byte("[stratafs]\naws_access_key_id = x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateCredentials(path); err == nil {
		t.Fatal("a file without a secret was accepted")
	}
}

func TestParseCopyRange(t *testing.T) {
	tests := []struct {
		h      string
		off, n int64
		ranged bool
		bad    bool
	}{
		{"", 0, -1, false, false},
		{"bytes=0-0", 0, 1, true, false},
		{"bytes=5-9", 5, 5, true, false},
		{"bytes=5-", 0, 0, false, true},
		{"bytes=-5", 0, 0, false, true},
		{"bytes=9-5", 0, 0, false, true},
		{"bytes=0-1,3-4", 0, 0, false, true},
		{"items=0-1", 0, 0, false, true},
		{"bytes=0-5368709120", 0, 0, false, true}, // one byte over 5 GiB
	}
	for _, tt := range tests {
		off, n, ranged, err := parseCopyRange(tt.h)
		if off != tt.off || n != tt.n || ranged != tt.ranged || (err != nil) != tt.bad {
			t.Errorf("parseCopyRange(%q) = %d, %d, %v, %v; want %d, %d, %v, error %v", tt.h, off, n, ranged, err, tt.off, tt.n, tt.ranged, tt.bad)
		}
	}
}

func TestDecodeXMLIsStrict(t *testing.T) {
	for doc, ok := range map[string]bool{
		`<CompleteMultipartUpload></CompleteMultipartUpload>`:                 true,
		"<?xml version=\"1.0\"?>\n<CompleteMultipartUpload/>\n<!-- end -->\n": true,
		`<CompleteMultipartUpload/><CompleteMultipartUpload/>`:                false,
		`<CompleteMultipartUpload/>trailing`:                                  false,
		`<CompleteMultipartUpload>`:                                           false,
		`<Other/>`:                                                            false,
		`<CompleteMultipartUpload><Part><PartNumber>1x</PartNumber></Part></CompleteMultipartUpload>`: false,
	} {
		var req completeRequest
		if err := decodeXML([]byte(doc), &req); (err == nil) != ok {
			t.Errorf("decodeXML(%q) = %v, want ok %v", doc, err, ok)
		}
	}
}
