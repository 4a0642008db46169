package kv

import (
	"bytes"
	"cmp"
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
		if name, err := decodeNameKey(bucketKey(ka), spaceBucket); err != nil || name != ka {
			t.Fatalf("decode(bucket(%q)) = %q,%v", ka, name, err)
		}

		start, end := prefixRange(spaceVersion, bid, prefix)
		in := bytes.Compare(start, ea) <= 0 && bytes.Compare(ea, end) < 0
		if has := strings.HasPrefix(ka, prefix); in != has {
			t.Fatalf("key %q, prefix %q: in range %v, has prefix %v", ka, prefix, in, has)
		}
	})
}

// FuzzUploadKeyOrder checks the upload and part keys as FuzzKeyOrder
// checks rows: byte order is (key, upload id, part number) order, decoding
// inverts encoding, prefix ranges hold the keys with the prefix, and the
// position ListUploads starts from after a key lies past every upload of
// that key and before every later key's.
func FuzzUploadKeyOrder(f *testing.F) {
	f.Add("a", "1", uint16(1), "a\x00", "0", uint16(2), uint64(7), "a")
	f.Add("a", "\x00", uint16(10000), "a", "", uint16(1), uint64(0), "")
	f.Add("a\xff", "\xff", uint16(0), "a", "\xff\x00", uint16(256), ^uint64(0), "a\xff")
	f.Fuzz(func(t *testing.T, ka, ia string, na uint16, kb, ib string, nb uint16, bid uint64, prefix string) {
		ua, ub := uploadKey(spaceUpload, bid, ka, ia), uploadKey(spaceUpload, bid, kb, ib)
		want := strings.Compare(ka, kb)
		if want == 0 {
			want = strings.Compare(ia, ib)
		}
		if got := bytes.Compare(ua, ub); got != want {
			t.Fatalf("order of uploads (%q,%q) vs (%q,%q): encoded %d, want %d", ka, ia, kb, ib, got, want)
		}
		pa, pb := partKey(bid, ka, ia, int32(na)), partKey(bid, kb, ib, int32(nb))
		if want == 0 {
			want = cmp.Compare(na, nb)
		}
		if got := bytes.Compare(pa, pb); got != want {
			t.Fatalf("order of parts (%q,%q,%d) vs (%q,%q,%d): encoded %d, want %d", ka, ia, na, kb, ib, nb, got, want)
		}

		gbid, gk, gid, err := decodeUploadKey(ua)
		if err != nil || gbid != bid || gk != ka || gid != ia {
			t.Fatalf("decode(upload(%d,%q,%q)) = %d,%q,%q,%v", bid, ka, ia, gbid, gk, gid, err)
		}
		gbid, gk, gid, gn, err := decodePartKey(pa)
		if err != nil || gbid != bid || gk != ka || gid != ia || gn != int32(na) {
			t.Fatalf("decode(part(%d,%q,%q,%d)) = %d,%q,%q,%d,%v", bid, ka, ia, na, gbid, gk, gid, gn, err)
		}
		if id, err := decodeNameKey(nameKey(spaceAccessKey, ka), spaceAccessKey); err != nil || id != ka {
			t.Fatalf("decode(access key(%q)) = %q,%v", ka, id, err)
		}

		start, end := prefixRange(spaceUpload, bid, prefix)
		in := bytes.Compare(start, ua) <= 0 && bytes.Compare(ua, end) < 0
		if has := strings.HasPrefix(ka, prefix); in != has {
			t.Fatalf("upload key %q, prefix %q: in range %v, has prefix %v", ka, prefix, in, has)
		}
		ps, pe := partRange(bid, ka, ia)
		if bytes.Compare(ps, pa) > 0 || bytes.Compare(pa, pe) >= 0 {
			t.Fatalf("part %d of (%q,%q) outside its upload's range", na, ka, ia)
		}
		if in := bytes.Compare(ps, pb) <= 0 && bytes.Compare(pb, pe) < 0; in != (ka == kb && ia == ib) {
			t.Fatalf("part of (%q,%q) in the range of (%q,%q): %v", kb, ib, ka, ia, in)
		}
		after := successor(keyKey(spaceUpload, bid, ka))
		if bytes.Compare(ua, after) >= 0 || (bytes.Compare(ub, after) >= 0) != (kb > ka) {
			t.Fatalf("after key %q: upload of %q at or past %x", ka, kb, after)
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
	if !bytes.Equal(end, []byte{spaceVersion + 1}) {
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
	upload := uploadKey(spaceUpload, 1, "k", "u")
	for name, k := range map[string][]byte{
		"wrong space":    append([]byte{spacePart}, upload[1:]...),
		"no id":          upload[:12],
		"trailing bytes": append(bytes.Clone(upload), 0),
	} {
		if _, _, _, err := decodeUploadKey(k); !errors.Is(err, meta.ErrCorrupt) {
			t.Errorf("upload key, %s: got %v, want ErrCorrupt", name, err)
		}
	}
	part := partKey(1, "k", "u", 1)
	for name, k := range map[string][]byte{
		"wrong space":     append([]byte{spaceUpload}, part[1:]...),
		"short number":    part[:len(part)-1],
		"trailing bytes":  append(bytes.Clone(part), 0),
		"unterminated id": part[:len(part)-5],
	} {
		if _, _, _, _, err := decodePartKey(k); !errors.Is(err, meta.ErrCorrupt) {
			t.Errorf("part key, %s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := decodeNameKey(nameKey(spaceBucket, "k"), spaceAccessKey); !errors.Is(err, meta.ErrCorrupt) {
		t.Errorf("bucket key as an access key: got %v, want ErrCorrupt", err)
	}
	if _, _, err := decodeKeyKey(append(keyKey(spaceLive, 1, "k"), 1), spaceLive); !errors.Is(err, meta.ErrCorrupt) {
		t.Errorf("live key with trailing bytes: got %v, want ErrCorrupt", err)
	}
	if _, err := decodeNameKey([]byte{spaceBucket, 'b', 0}, spaceBucket); !errors.Is(err, meta.ErrCorrupt) {
		t.Errorf("unterminated bucket key: got %v, want ErrCorrupt", err)
	}
}
