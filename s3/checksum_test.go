package s3

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
)

// TestPartsSum checks the sums of a multipart upload against sums of the
// whole object's bytes: FULL_OBJECT CRCs combined from the parts' must be
// the CRC of the concatenation, and COMPOSITE sums the sum of the sums.
func TestPartsSum(t *testing.T) {
	parts := [][]byte{make([]byte, 5<<20+3), make([]byte, 1), make([]byte, 0), make([]byte, 70000)}
	var whole []byte
	for _, p := range parts {
		rand.Read(p)
		whole = append(whole, p...)
	}
	sum := func(a checksumAlg, b []byte) []byte {
		h := a.new()
		h.Write(b)
		return h.Sum(nil)
	}
	for _, a := range checksumAlgs {
		var sums []string
		var sizes []int64
		var concat []byte
		for _, p := range parts {
			s := sum(a, p)
			sums = append(sums, base64.StdEncoding.EncodeToString(s))
			sizes = append(sizes, int64(len(p)))
			concat = append(concat, s...)
		}
		got, err := partsSum(a, false, sums, sizes)
		want := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(sum(a, concat)), len(parts))
		if err != nil || got != want {
			t.Errorf("%s composite = %q, %v; want %q", a.name, got, err, want)
		}
		if sumType(got) != typeComposite {
			t.Errorf("%s: sumType(%q) = %s", a.name, got, sumType(got))
		}
		if a.crc == nil {
			continue
		}
		got, err = partsSum(a, true, sums, sizes)
		want = base64.StdEncoding.EncodeToString(sum(a, whole))
		if err != nil || got != want {
			t.Errorf("%s full object = %q, %v; want %q", a.name, got, err, want)
		}
		if sumType(got) != typeFullObject {
			t.Errorf("%s: sumType(%q) = %s", a.name, got, sumType(got))
		}
	}
}
