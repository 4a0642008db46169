package kv

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// padID makes a version id of arbitrary fuzz bytes.
func padID(b []byte) meta.VersionID {
	var id meta.VersionID
	copy(id[:], b)
	return id
}

// FuzzKeyOrder checks the encoding's two promises for any two rows: byte
// order of encoded keys is (key, id) order, and decoding inverts encoding.
// It also checks prefix ranges: a row's key has the prefix exactly when its
// encoded key falls in the prefix's range.
func FuzzKeyOrder(f *testing.F) {
	f.Add("a", []byte{1}, "a\x00", []byte{0}, uint64(7), "a")
	f.Add("a", []byte{2}, "a", []byte{1}, uint64(0), "")
	f.Add("\x00", []byte{}, "", []byte{0xff}, ^uint64(0), "\x00")
	f.Add("a\xff", []byte{}, "a\x00\xff", []byte{}, uint64(1), "a\xff")
	f.Fuzz(func(t *testing.T, ka string, ia []byte, kb string, ib []byte, bid uint64, prefix string) {
		a, b := padID(ia), padID(ib)
		ea, eb := versionKey(bid, ka, a), versionKey(bid, kb, b)
		want := strings.Compare(ka, kb)
		if want == 0 {
			want = a.Compare(b)
		}
		if got := bytes.Compare(ea, eb); got != want {
			t.Fatalf("order of (%q,%s) vs (%q,%s): encoded %d, want %d", ka, a, kb, b, got, want)
		}

		gbid, gk, gid, err := decodeVersionKey(ea)
		if err != nil || gbid != bid || gk != ka || gid != a {
			t.Fatalf("decode(encode(%d,%q,%s)) = %d,%q,%s,%v", bid, ka, a, gbid, gk, gid, err)
		}
		lbid, lk, err := decodeKeyKey(keyKey(spaceLive, bid, ka), spaceLive)
		if err != nil || lbid != bid || lk != ka {
			t.Fatalf("decode(live(%d,%q)) = %d,%q,%v", bid, ka, lbid, lk, err)
		}
		if name, err := decodeBucketKey(bucketKey(ka)); err != nil || name != ka {
			t.Fatalf("decode(bucket(%q)) = %q,%v", ka, name, err)
		}

		start, end := prefixRange(spaceVersion, bid, prefix)
		in := bytes.Compare(start, ea) <= 0 && bytes.Compare(ea, end) < 0
		if has := strings.HasPrefix(ka, prefix); in != has {
			t.Fatalf("key %q, prefix %q: in range %v, has prefix %v", ka, prefix, in, has)
		}
	})
}

// TestStuffedPrefix checks the property prefix ranges stand on: the
// stuffed prefix without terminator is a byte prefix of every key that
// starts with it, including at the 0x00 and 0xff boundaries.
func TestStuffedPrefix(t *testing.T) {
	for _, c := range []struct{ prefix, key string }{
		{"", ""}, {"", "a"}, {"a", "a"}, {"a", "ab"}, {"a", "a\x00"},
		{"a\x00", "a\x00"}, {"a\x00", "a\x00\x00b"}, {"\x00", "\x00\xff"},
		{"a\xff", "a\xff\xff"},
	} {
		p := appendStuffed(nil, c.prefix)
		if k := versionKey(3, c.key, meta.VersionID{1}); !bytes.HasPrefix(k[9:], p) {
			t.Errorf("stuffed %q = %x is not a prefix of %x (key %q)", c.prefix, p, k[9:], c.key)
		}
	}
	// Keys that extend the prefix only after a terminator stay out.
	start, end := prefixRange(spaceVersion, 3, "a\x00")
	for _, key := range []string{"a", "a\x01", "b"} {
		if k := versionKey(3, key, meta.VersionID{}); bytes.Compare(start, k) <= 0 && bytes.Compare(k, end) < 0 {
			t.Errorf("key %q in the range of prefix %q", key, "a\x00")
		}
	}
	// A bucket's range never reaches into the next bucket's, even at
	// bucket id 0xff..ff.
	start, end = prefixRange(spaceVersion, ^uint64(0), "")
	if k := versionKey(^uint64(0), "\xff\xff", meta.VersionID{0xff}); bytes.Compare(k, start) < 0 || bytes.Compare(k, end) >= 0 {
		t.Errorf("row of the last bucket out of its range [%x, %x)", start, end)
	}
	if bytes.Compare(end, []byte{spaceVersion + 1}) != 0 {
		t.Errorf("end of the last bucket = %x, want %x", end, []byte{spaceVersion + 1})
	}
}

func TestDecodeRejects(t *testing.T) {
	good := versionKey(1, "k", meta.VersionID{1})
	for name, k := range map[string][]byte{
		"empty":          nil,
		"wrong space":    append([]byte{spaceLive}, good[1:]...),
		"short bucket":   good[:5],
		"unterminated":   good[:11],
		"bad escape":     append(bytes.Clone(good[:9]), 'k', 0, 7, 0, 0),
		"short id":       good[:len(good)-1],
		"trailing bytes": append(bytes.Clone(good), 0),
	} {
		if _, _, _, err := decodeVersionKey(k); !errors.Is(err, meta.ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, _, err := decodeKeyKey(append(keyKey(spaceLive, 1, "k"), 1), spaceLive); !errors.Is(err, meta.ErrCorrupt) {
		t.Errorf("live key with trailing bytes: got %v, want ErrCorrupt", err)
	}
	if _, err := decodeBucketKey([]byte{spaceBucket, 'b', 0}); !errors.Is(err, meta.ErrCorrupt) {
		t.Errorf("unterminated bucket key: got %v, want ErrCorrupt", err)
	}
}
