package s3

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"maps"
	"net/http"
	"strings"

	"github.com/stratafs/stratafs/s3/sigv4"
)

// A checksumAlg is one of the x-amz-checksum-* algorithms. Sums are the
// big-endian digest bytes, base64-encoded on the wire and in
// meta.Version.Checksums (keyed by name).
//
// An algorithm with an empty sum is one a multipart upload was created
// with (x-amz-checksum-algorithm): the core gives the completed version
// the upload's attributes as they were recorded then, and no sum of the
// whole object is known. Listings name the algorithm, as S3 does for
// such objects; GET, HEAD and XML results send no empty sum.
type checksumAlg struct {
	name string // "CRC32", as x-amz-sdk-checksum-algorithm and meta spell it
	size int
	new  func() hash.Hash
}

// header is the request and response header that carries the sum.
func (a checksumAlg) header() string { return "x-amz-checksum-" + strings.ToLower(a.name) }

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// nvme is CRC-64/NVME: polynomial 0xad93d23594c93659, bit-reversed
	// as hash/crc64 wants it.
	nvme = crc64.MakeTable(0x9a6c9329ac4bc9b5)
)

var checksumAlgs = []checksumAlg{
	{"CRC32", 4, func() hash.Hash { return crc32.NewIEEE() }},
	{"CRC32C", 4, func() hash.Hash { return crc32.New(castagnoli) }},
	{"CRC64NVME", 8, func() hash.Hash { return crc64.New(nvme) }},
	{"SHA1", sha1.Size, sha1.New},
	{"SHA256", sha256.Size, sha256.New},
}

func checksumByName(name string) (checksumAlg, bool) {
	for _, a := range checksumAlgs {
		if strings.EqualFold(a.name, name) {
			return a, true
		}
	}
	return checksumAlg{}, false
}

// checksumBody wraps a request body so that the x-amz-checksum-* the
// client sent, in a header or as an aws-chunked trailer, is verified
// while the body streams (a mismatch fails the read that ends it, so
// nothing is stored). sum is nil when the client sent no checksum.
func checksumBody(q *request, body io.Reader, size int64) (r io.Reader, sum *bodySum, err error) {
	alg, want, err := requestChecksum(q)
	if err != nil || want == nil {
		return body, nil, err
	}
	sum = &bodySum{alg: alg}
	return sigv4.VerifyPayload(body, size, sigv4.Digest{
		Hash: alg.new(),
		Want: func() ([]byte, error) {
			v, err := want()
			if err != nil {
				return nil, err
			}
			b, err := decodeSum(alg, v)
			if err != nil {
				return nil, errMalformedTrailer.with("The value of trailer %s is not a valid %s.", alg.header(), alg.name)
			}
			sum.value = v
			return b, nil
		},
		Mismatch: errBadDigest.with("The %s you specified did not match the calculated checksum.", alg.name),
	}), sum, nil
}

// A bodySum is the checksum a request declared for its body; its value
// is set once the whole body was read and matched it.
type bodySum struct {
	alg   checksumAlg
	value string // base64
}

// record returns sums (a version's or a part's) with the verified sum
// added. It is called from the core's Finish hooks, once the body is
// stored: a sum still unverified then means the body was not read to its
// end, and nothing may commit.
func (s *bodySum) record(sums map[string]string) (map[string]string, error) {
	if s == nil {
		return sums, nil
	}
	if s.value == "" {
		return nil, fmt.Errorf("the body's %s was never verified", s.alg.name)
	}
	out := maps.Clone(sums)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out[s.alg.name] = s.value
	return out, nil
}

// requestChecksum finds the one checksum a request declares: an
// x-amz-checksum-* header, or one named by x-amz-trailer. want returns the
// expected base64 sum; it is nil when there is no checksum.
func requestChecksum(q *request) (alg checksumAlg, want func() (string, error), err error) {
	h := q.r.Header
	found := 0
	for _, a := range checksumAlgs {
		if v := h.Get(a.header()); v != "" {
			if _, err := decodeSum(a, v); err != nil {
				return alg, nil, errInvalidRequest.with("Value for %s header is invalid.", a.header())
			}
			found++
			alg, want = a, func() (string, error) { return v, nil }
		}
	}
	for _, t := range strings.Split(h.Get("X-Amz-Trailer"), ",") {
		name, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(t)), "x-amz-checksum-")
		if !ok {
			continue
		}
		a, ok := checksumByName(name)
		if !ok {
			return alg, nil, errInvalidRequest.with("The trailer x-amz-checksum-%s is not a supported checksum.", name)
		}
		found++
		alg, want = a, func() (string, error) {
			v, ok := q.auth.Trailer(a.header())
			if !ok {
				return "", errMalformedTrailer.with("The trailer %s did not arrive.", a.header())
			}
			return v, nil
		}
	}
	if found > 1 {
		return alg, nil, errInvalidRequest.with("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
	}
	if sdk := h.Get("X-Amz-Sdk-Checksum-Algorithm"); sdk != "" {
		a, ok := checksumByName(sdk)
		switch {
		case !ok:
			return alg, nil, errInvalidRequest.with("Value for x-amz-sdk-checksum-algorithm header is invalid.")
		case found == 0:
			return alg, nil, errInvalidRequest.with("x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
		case a.name != alg.name:
			return alg, nil, errInvalidRequest.with("x-amz-sdk-checksum-algorithm %s does not match the checksum sent, %s.", sdk, alg.name)
		}
	}
	return alg, want, nil
}

func decodeSum(a checksumAlg, v string) ([]byte, error) {
	sum, err := base64.StdEncoding.DecodeString(v)
	if err == nil && len(sum) != a.size {
		err = base64.CorruptInputError(len(v))
	}
	return sum, err
}

// setChecksumHeaders returns a version's stored sums, as S3 does when a
// GET or HEAD asks with x-amz-checksum-mode: ENABLED.
func setChecksumHeaders(h http.Header, sums map[string]string) {
	for _, a := range checksumAlgs {
		if v := sums[a.name]; v != "" {
			h.Set(a.header(), v)
			h.Set("x-amz-checksum-type", "FULL_OBJECT")
		}
	}
}

// checksumFields are the checksums of an XML response (CopyObjectResult)
// or listing entry.
type checksumFields struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
	ChecksumType      string `xml:",omitempty"`
}

func checksumXML(sums map[string]string) checksumFields {
	f := checksumFields{
		ChecksumCRC32:     sums["CRC32"],
		ChecksumCRC32C:    sums["CRC32C"],
		ChecksumCRC64NVME: sums["CRC64NVME"],
		ChecksumSHA1:      sums["SHA1"],
		ChecksumSHA256:    sums["SHA256"],
	}
	if f != (checksumFields{}) {
		f.ChecksumType = "FULL_OBJECT"
	}
	return f
}
