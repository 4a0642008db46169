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
// version ids and part numbers, fixed-width, come last.
//
//	B name                 → MarshalBucket
//	V bid key id           → MarshalVersion: every row, (key, id) order; a
//	                         manifest over manifestApart bytes is kept in M
//	                         (meta.MarshalVersionApart)
//	M bid key id           → the manifest of the V row (key, id), kept apart
//	S bid key id           → key|id: the row whose M entry the V row (key, id)
//	                         reads (manifest.go)
//	H bid key id           → how many rows read the M entry (key, id), if
//	                         not one (manifest.go)
//	C bid key              → the key's first V row while it is not a delete marker
//	N bid key              → the id of the key's null row
//	U bid key upload       → MarshalUpload: (key, upload id) order, as S3 lists them
//	P bid key upload n     → MarshalPart: n is the part number, 4 bytes big-endian
//	A id                   → MarshalAccessKey
//	L name                 → MarshalLease: named leases (the collector's)
//	K chunk                → MarshalCondemned: the collector's ledger (ledger.go)
//	R name                 → MarshalCheckpoint: where the collector's pass stopped (checkpoint.go)
//
// Parts are entries of their own, not fields of the upload record, so
// uploading a part writes only that part, whatever the upload holds.
const (
	spaceBucket    byte = 'B'
	spaceVersion   byte = 'V'
	spaceManifest  byte = 'M'
	spaceShared    byte = 'S'
	spaceHolders   byte = 'H'
	spaceLive      byte = 'C'
	spaceNull      byte = 'N'
	spaceUpload    byte = 'U'
	spacePart      byte = 'P'
	spaceAccessKey byte = 'A'
	spaceLease     byte = 'L'
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

// nameKey is space|name: the key of a record that belongs to no bucket,
// a bucket (by name) or an access key (by id).
func nameKey(space byte, name string) []byte {
	return appendString(append(make([]byte, 0, 3+len(name)), space), name)
}

// bucketKey is the key of the bucket record named name.
func bucketKey(name string) []byte { return nameKey(spaceBucket, name) }

// keyKey is space|bid|key: a C or N entry, or the prefix of key's V rows.
func keyKey(space byte, bid uint64, key string) []byte {
	return appendString(bucketSpace(space, bid, len(key)+2+idLen), key)
}

// rowKey is space|bid|key|id: the V row (key, id), or an entry kept
// beside it (M, S, H).
func rowKey(space byte, bid uint64, key string, id meta.VersionID) []byte {
	return append(keyKey(space, bid, key), id[:]...)
}

// versionKey is the key of the V row (key, id).
func versionKey(bid uint64, key string, id meta.VersionID) []byte {
	return rowKey(spaceVersion, bid, key, id)
}

// manifestKey is the key of the M entry of the V row (key, id).
func manifestKey(bid uint64, key string, id meta.VersionID) []byte {
	return rowKey(spaceManifest, bid, key, id)
}

// uploadKey is space|bid|key|id: the U entry of upload id of key, or with
// spacePart the prefix of its parts' entries.
func uploadKey(space byte, bid uint64, key, id string) []byte {
	k := bucketSpace(space, bid, len(key)+len(id)+8)
	return appendString(appendString(k, key), id)
}

// partKey is the key of part n of upload id of key.
func partKey(bid uint64, key, id string, n int32) []byte {
	return binary.BigEndian.AppendUint32(uploadKey(spacePart, bid, key, id), uint32(n))
}

// partRange returns the range [start, end) of the parts of an upload.
func partRange(bid uint64, key, id string) (start, end []byte) {
	start = uploadKey(spacePart, bid, key, id)
	return start, successor(start)
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

// noRest reports bytes left over after the last field of a key.
func noRest(rest []byte) error {
	if len(rest) > 0 {
		return fmt.Errorf("%w: %d trailing bytes", errKey, len(rest))
	}
	return nil
}

// decodeNameKey is the inverse of nameKey.
func decodeNameKey(k []byte, space byte) (string, error) {
	if len(k) == 0 || k[0] != space {
		return "", fmt.Errorf("%w: not in space %q: %q", errKey, space, k)
	}
	name, rest, err := readString(k[1:])
	if err != nil {
		return "", err
	}
	return name, noRest(rest)
}

// decodeKeyKey is the inverse of keyKey.
func decodeKeyKey(k []byte, space byte) (bid uint64, key string, err error) {
	bid, rest, err := readSpace(k, space)
	if err != nil {
		return 0, "", err
	}
	if key, rest, err = readString(rest); err != nil {
		return 0, "", err
	}
	return bid, key, noRest(rest)
}

// decodeVersionKey is the inverse of versionKey.
func decodeVersionKey(k []byte) (bid uint64, key string, id meta.VersionID, err error) {
	return decodeRowKey(k, spaceVersion)
}

// decodeRowKey is the inverse of rowKey.
func decodeRowKey(k []byte, space byte) (bid uint64, key string, id meta.VersionID, err error) {
	bid, rest, err := readSpace(k, space)
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

// readUpload decodes space|bid|key|id from the front of k.
func readUpload(k []byte, space byte) (bid uint64, key, id string, rest []byte, err error) {
	if bid, rest, err = readSpace(k, space); err != nil {
		return 0, "", "", nil, err
	}
	if key, rest, err = readString(rest); err != nil {
		return 0, "", "", nil, err
	}
	if id, rest, err = readString(rest); err != nil {
		return 0, "", "", nil, err
	}
	return bid, key, id, rest, nil
}

// decodeUploadKey is the inverse of uploadKey in spaceUpload.
func decodeUploadKey(k []byte) (bid uint64, key, id string, err error) {
	bid, key, id, rest, err := readUpload(k, spaceUpload)
	if err != nil {
		return 0, "", "", err
	}
	return bid, key, id, noRest(rest)
}

// decodePartKey is the inverse of partKey.
func decodePartKey(k []byte) (bid uint64, key, id string, n int32, err error) {
	bid, key, id, rest, err := readUpload(k, spacePart)
	if err != nil {
		return 0, "", "", 0, err
	}
	if len(rest) != 4 {
		return 0, "", "", 0, fmt.Errorf("%w: part number of %d bytes", errKey, len(rest))
	}
	return bid, key, id, int32(binary.BigEndian.Uint32(rest)), nil
}
