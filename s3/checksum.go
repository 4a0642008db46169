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
	crc  *crcMath // the CRC's arithmetic; nil for the SHA algorithms
}

// Checksum types (x-amz-checksum-type). A COMPOSITE sum of a multipart
// upload is the sum of its parts' sums, stored and shown with "-N" (N
// parts) after it; a FULL_OBJECT sum covers the object's bytes.
const (
	typeComposite  = "COMPOSITE"
	typeFullObject = "FULL_OBJECT"
)

// sumType is the checksum type of a stored sum.
func sumType(v string) string {
	if strings.Contains(v, "-") {
		return typeComposite
	}
	return typeFullObject
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
	{"CRC32", 4, func() hash.Hash { return crc32.NewIEEE() }, newCRCMath(crc32.IEEE, 32)},
	{"CRC32C", 4, func() hash.Hash { return crc32.New(castagnoli) }, newCRCMath(crc32.Castagnoli, 32)},
	{"CRC64NVME", 8, func() hash.Hash { return crc64.New(nvme) }, newCRCMath(0x9a6c9329ac4bc9b5, 64)},
	{"SHA1", sha1.Size, sha1.New, nil},
	{"SHA256", sha256.Size, sha256.New, nil},
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

// computeSum wraps body so that its alg sum is computed as it streams,
// for a part of a FULL_OBJECT upload sent without one; the sum's value is
// set once the body was read to its end.
func computeSum(alg checksumAlg, body io.Reader) (io.Reader, *bodySum) {
	r := &summingReader{r: body, h: alg.new(), sum: &bodySum{alg: alg}}
	return r, r.sum
}

type summingReader struct {
	r   io.Reader
	h   hash.Hash
	sum *bodySum
}

func (s *summingReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	if err == io.EOF {
		s.sum.value = base64.StdEncoding.EncodeToString(s.h.Sum(nil))
	}
	return n, err
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
			h.Set("x-amz-checksum-type", sumType(v))
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

// sums returns the checksums of f by algorithm name.
func (f checksumFields) sums() map[string]string {
	out := map[string]string{}
	for name, v := range map[string]string{"CRC32": f.ChecksumCRC32, "CRC32C": f.ChecksumCRC32C,
		"CRC64NVME": f.ChecksumCRC64NVME, "SHA1": f.ChecksumSHA1, "SHA256": f.ChecksumSHA256} {
		if v = strings.TrimSpace(v); v != "" {
			out[name] = v
		}
	}
	return out
}

func checksumXML(sums map[string]string) checksumFields {
	f := checksumFields{
		ChecksumCRC32:     sums["CRC32"],
		ChecksumCRC32C:    sums["CRC32C"],
		ChecksumCRC64NVME: sums["CRC64NVME"],
		ChecksumSHA1:      sums["SHA1"],
		ChecksumSHA256:    sums["SHA256"],
	}
	for _, v := range sums {
		if v != "" {
			f.ChecksumType = sumType(v)
		}
	}
	return f
}

// partsSum is the sum S3 gives a multipart upload of alg: with full, the
// parts' CRCs combined into the CRC of the whole (no byte is read again);
// else the sum of the parts' sums, followed by "-N". sums are the parts'
// base64 sums, in order, and sizes their lengths.
func partsSum(alg checksumAlg, full bool, sums []string, sizes []int64) (string, error) {
	raw := make([][]byte, len(sums))
	for i, v := range sums {
		b, err := decodeSum(alg, v)
		if err != nil {
			return "", fmt.Errorf("part sum %q: %w", v, err)
		}
		raw[i] = b
	}
	if !full {
		h := alg.new()
		for _, b := range raw {
			h.Write(b)
		}
		return fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(sums)), nil
	}
	var crc uint64
	for i, b := range raw {
		crc = alg.crc.combine(crc, beUint(b), sizes[i])
	}
	out := make([]byte, alg.size)
	for i := range out {
		out[i] = byte(crc >> (8 * (alg.size - 1 - i)))
	}
	return base64.StdEncoding.EncodeToString(out), nil
}

// beUint reads a big-endian CRC of 4 or 8 bytes.
func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// crcMath is arithmetic on CRCs of the reflected kind hash/crc32 and
// hash/crc64 compute (initial value and final XOR all ones): for those,
// CRC(A‖B) = CRC(A)·x^(8·len(B)) mod P  XOR  CRC(B), the way zlib's
// crc32_combine works. Polynomials are in reflected bit order, so x^0 is
// the highest bit of the width.
type crcMath struct {
	poly uint64
	one  uint64     // x^0
	x2n  [64]uint64 // x^(2^k) mod P
}

func newCRCMath(poly uint64, width int) *crcMath {
	m := &crcMath{poly: poly, one: 1 << (width - 1)}
	p := m.one >> 1 // x^1
	for k := range m.x2n {
		m.x2n[k] = p
		p = m.mul(p, p)
	}
	return m
}

// mul returns a·b mod P.
func (m *crcMath) mul(a, b uint64) uint64 {
	var p uint64
	for bit := m.one; bit != 0; bit >>= 1 {
		if a&bit != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ m.poly
		} else {
			b >>= 1
		}
	}
	return p
}

// combine returns the CRC of A‖B from a = CRC(A), b = CRC(B) and n = len(B).
func (m *crcMath) combine(a, b uint64, n int64) uint64 {
	p := m.one // x^(8n), built from the binary digits of n
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = m.mul(m.x2n[k], p)
		}
	}
	return m.mul(p, a) ^ b
}
