package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// The key encoding maps every record to one engine key whose byte order is
// the order scans need. A key starts with a one-byte space prefix; bucket
// ids are 8 bytes big-endian; strings are byte-stuffed (0x00 → 0x00 0xFF)
// and terminated by 0x00 0x00, so a string sorts before its extensions and
// the bytes that follow it never take part in comparing two strings;
// version ids, fixed-width, come last.
//
//	B name                 → MarshalBucket
//	V bid key id           → MarshalVersion: every row, (key, id) order
//	C bid key              → the key's first V row while it is not a delete marker
//	N bid key              → the id of the key's null row
const (
	spaceBucket  byte = 'B'
	spaceVersion byte = 'V'
	spaceLive    byte = 'C'
	spaceNull    byte = 'N'
)

const idLen = len(meta.VersionID{})

// errKey is wrapped by every decoding failure.
var errKey = fmt.Errorf("%w: malformed key", meta.ErrCorrupt)

// appendStuffed appends s byte-stuffed, without the terminator: the result
// is a byte prefix of the encoding of every string that starts with s.
func appendStuffed(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, s[i])
		if s[i] == 0 {
			dst = append(dst, 0xff)
		}
	}
	return dst
}

// appendString appends s stuffed and terminated.
func appendString(dst []byte, s string) []byte {
	return append(appendStuffed(dst, s), 0, 0)
}

// bucketSpace returns space|bid, the prefix of all of a bucket's keys in
// that space; extra is spare capacity for what the caller appends.
func bucketSpace(space byte, bid uint64, extra int) []byte {
	k := make([]byte, 9, 9+extra)
	k[0] = space
	binary.BigEndian.PutUint64(k[1:], bid)
	return k
}

// bucketKey is the key of the bucket record named name.
func bucketKey(name string) []byte {
	return appendString(append(make([]byte, 0, 3+len(name)), spaceBucket), name)
}

// keyKey is space|bid|key: a C or N entry, or the prefix of key's V rows.
func keyKey(space byte, bid uint64, key string) []byte {
	return appendString(bucketSpace(space, bid, len(key)+2+idLen), key)
}

// versionKey is the key of the V row (key, id).
func versionKey(bid uint64, key string, id meta.VersionID) []byte {
	return append(keyKey(spaceVersion, bid, key), id[:]...)
}

// prefixRange returns the range [start, end) of space's keys in bucket bid
// whose string starts with prefix.
func prefixRange(space byte, bid uint64, prefix string) (start, end []byte) {
	start = appendStuffed(bucketSpace(space, bid, len(prefix)), prefix)
	return start, successor(start)
}

// successor returns the smallest key greater than every key that has p as
// a byte prefix. Space prefixes are below 0xff, so there always is one.
func successor(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] < 0xff {
			s := bytes.Clone(p[:i+1])
			s[i]++
			return s
		}
	}
	panic("kv: no successor of an all-0xff key")
}

// readString decodes a stuffed, terminated string from the front of b.
func readString(b []byte) (s string, rest []byte, err error) {
	var out []byte // only for strings that contain 0x00
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 || i+1 == len(b) {
			return "", nil, fmt.Errorf("%w: unterminated string", errKey)
		}
		switch b[i+1] {
		case 0:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			return string(append(out, b[:i]...)), b[i+2:], nil
		case 0xff:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
		default:
			return "", nil, fmt.Errorf("%w: 0x00 0x%02x in a string", errKey, b[i+1])
		}
	}
}

// readSpace checks k's space prefix and bucket id and returns the rest.
func readSpace(k []byte, space byte) (bid uint64, rest []byte, err error) {
	if len(k) < 9 || k[0] != space {
		return 0, nil, fmt.Errorf("%w: not in space %q: %q", errKey, space, k)
	}
	return binary.BigEndian.Uint64(k[1:9]), k[9:], nil
}

// decodeBucketKey returns the name in a bucket record's key.
func decodeBucketKey(k []byte) (string, error) {
	if len(k) == 0 || k[0] != spaceBucket {
		return "", fmt.Errorf("%w: not a bucket key: %q", errKey, k)
	}
	name, rest, err := readString(k[1:])
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %d trailing bytes", errKey, len(rest))
	}
	return name, err
}

// decodeKeyKey is the inverse of keyKey.
func decodeKeyKey(k []byte, space byte) (bid uint64, key string, err error) {
	bid, rest, err := readSpace(k, space)
	if err != nil {
		return 0, "", err
	}
	key, rest, err = readString(rest)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %d trailing bytes", errKey, len(rest))
	}
	return bid, key, err
}

// decodeVersionKey is the inverse of versionKey.
func decodeVersionKey(k []byte) (bid uint64, key string, id meta.VersionID, err error) {
	bid, rest, err := readSpace(k, spaceVersion)
	if err != nil {
		return 0, "", id, err
	}
	key, rest, err = readString(rest)
	if err != nil {
		return 0, "", id, err
	}
	if len(rest) != idLen {
		return 0, "", id, fmt.Errorf("%w: version id of %d bytes", errKey, len(rest))
	}
	return bid, key, meta.VersionID(rest), nil
}
