package meta

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// A version row is encoded and decoded here by hand, as metapb.Version on
// the wire, not through the protobuf runtime: rows are what the store
// reads and writes most (a stat, a GET, every mutation's check of its
// key's head). Through the runtime's reflection a 4 KiB file's row took
// 2.7-3.0 µs and 17 allocations to decode and 2.2-2.6 µs to encode, 5-7 %
// of the mount's CPU per rename; here 1.8-2.0 µs and 9, 1.4-1.7 µs, most
// of it the copy of the inline bytes. The encoding is the protobuf one,
// byte for byte, so rows written either way read either way; the tests
// check the two against each other.

// Field numbers of metapb.Version, Content and Posix (meta.proto); a test
// checks them against the descriptors.
const (
	fieldKey          protowire.Number = 1
	fieldID           protowire.Number = 2
	fieldNull         protowire.Number = 3
	fieldDeleteMarker protowire.Number = 4
	fieldSize         protowire.Number = 5
	fieldETag         protowire.Number = 6
	fieldContent      protowire.Number = 7
	fieldUserMeta     protowire.Number = 8
	fieldPOSIX        protowire.Number = 9
	fieldStorageClass protowire.Number = 10
	fieldChecksums    protowire.Number = 11
	fieldOwner        protowire.Number = 12
	fieldManifest     protowire.Number = 13

	// A map entry's key and value.
	fieldEntryKey   protowire.Number = 1
	fieldEntryValue protowire.Number = 2

	fieldPOSIXMode    protowire.Number = 1
	fieldPOSIXUID     protowire.Number = 2
	fieldPOSIXGID     protowire.Number = 3
	fieldPOSIXMtime   protowire.Number = 4
	fieldPOSIXSymlink protowire.Number = 5
)

// appendVersion appends the encoding of v, whose key and size were
// checked, to b. Fields go in the order of their numbers, the manifest's
// last (VersionAttrs relies on it), and map entries in the order of their
// keys, so the encoding is a function of the row. Only a text field that
// is not UTF-8 fails: proto3 strings must be.
func appendVersion(b []byte, v *Version) ([]byte, error) {
	if !utf8.ValidString(v.ETag) || !utf8.ValidString(v.StorageClass) || !utf8.ValidString(v.Owner) {
		return nil, fmt.Errorf("etag %q, storage class %q or owner %q is not UTF-8: %w", v.ETag, v.StorageClass, v.Owner, ErrInvalidArgument)
	}
	b = appendString(b, fieldKey, v.Key)
	b = appendBytes(b, fieldID, v.ID[:])
	b = appendBool(b, fieldNull, v.Null)
	b = appendBool(b, fieldDeleteMarker, v.DeleteMarker)
	b = appendVarint(b, fieldSize, uint64(v.Size))
	b = appendString(b, fieldETag, v.ETag)
	if c := v.Content; c != (Content{}) {
		b = appendMessage(b, fieldContent, func(b []byte) []byte {
			for i, s := range []string{c.Type, c.Encoding, c.Disposition, c.Language, c.CacheControl, c.Expires} {
				b = appendString(b, protowire.Number(i+1), s)
			}
			return b
		})
	}
	b, err := appendMap(b, fieldUserMeta, v.UserMeta, false)
	if err != nil {
		return nil, fmt.Errorf("user metadata: %w", err)
	}
	if p := v.POSIX; p != nil {
		mtime, err := unixNanos(p.Mtime)
		if err != nil {
			return nil, fmt.Errorf("mtime: %w", err)
		}
		b = appendMessage(b, fieldPOSIX, func(b []byte) []byte {
			b = appendVarint(b, fieldPOSIXMode, uint64(p.Mode))
			b = appendVarint(b, fieldPOSIXUID, uint64(p.UID))
			b = appendVarint(b, fieldPOSIXGID, uint64(p.GID))
			if mtime != nil { // optional: present even when 0
				b = protowire.AppendTag(b, fieldPOSIXMtime, protowire.VarintType)
				b = protowire.AppendVarint(b, uint64(*mtime))
			}
			return appendString(b, fieldPOSIXSymlink, p.Symlink)
		})
	}
	b = appendString(b, fieldStorageClass, v.StorageClass)
	if b, err = appendMap(b, fieldChecksums, v.Checksums, true); err != nil {
		return nil, fmt.Errorf("checksums: %w", err)
	}
	b = appendString(b, fieldOwner, v.Owner)
	return appendBytes(b, fieldManifest, v.Manifest), nil
}

// appendString appends a text or bytes field; proto3 leaves out empty ones.
func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, n protowire.Number, s []byte) []byte {
	if len(s) == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, s)
}

func appendVarint(b []byte, n protowire.Number, x uint64) []byte {
	if x == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, x)
}

func appendBool(b []byte, n protowire.Number, x bool) []byte {
	return appendVarint(b, n, protowire.EncodeBool(x))
}

// appendMessage appends the embedded message that body appends. Its
// length goes first: one byte is left for it, enough below 128 bytes,
// and the body moved along if it needs more.
func appendMessage(b []byte, n protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	start := len(b)
	b = body(append(b, 0))
	size := uint64(len(b) - start - 1)
	if w := protowire.SizeVarint(size); w > 1 {
		b = slices.Insert(b, start+1, make([]byte, w-1)...)
	}
	protowire.AppendVarint(b[start:start], size)
	return b
}

// appendMap appends m as a protobuf map<string, bytes> (or string, when
// text: then the values must be UTF-8 too), in the order of its keys.
func appendMap(b []byte, n protowire.Number, m map[string]string, text bool) ([]byte, error) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val := m[k]
		if !utf8.ValidString(k) || text && !utf8.ValidString(val) {
			return nil, fmt.Errorf("entry %q is not UTF-8: %w", k, ErrInvalidArgument)
		}
		b = appendMessage(b, n, func(b []byte) []byte {
			// A map entry holds both fields, empty or not.
			b = protowire.AppendTag(b, fieldEntryKey, protowire.BytesType)
			b = protowire.AppendString(b, k)
			b = protowire.AppendTag(b, fieldEntryValue, protowire.BytesType)
			return protowire.AppendString(b, val)
		})
	}
	return b, nil
}

// decodeVersion decodes a row as protobuf does metapb.Version: fields in
// any order, the last of a repeated scalar winning, messages merged, and
// unknown fields, or known ones of another wire type, skipped. Text
// fields must be UTF-8. The caller validates the row.
func decodeVersion(data []byte) (*Version, error) {
	v := new(Version)
	var id []byte
	err := fields(data, func(n protowire.Number, typ protowire.Type, x uint64, f []byte) (err error) {
		switch {
		case typ == protowire.VarintType:
			switch n {
			case fieldNull:
				v.Null = x != 0
			case fieldDeleteMarker:
				v.DeleteMarker = x != 0
			case fieldSize:
				v.Size = int64(x)
			}
		case typ != protowire.BytesType:
		case n == fieldKey:
			v.Key, err = text("key", f)
		case n == fieldID:
			id = f
		case n == fieldETag:
			v.ETag, err = text("etag", f)
		case n == fieldContent:
			err = decodeContent(&v.Content, f)
		case n == fieldUserMeta:
			err = decodeEntry(&v.UserMeta, f, false)
		case n == fieldPOSIX:
			err = decodePOSIX(&v.POSIX, f)
		case n == fieldStorageClass:
			v.StorageClass, err = text("storage class", f)
		case n == fieldChecksums:
			err = decodeEntry(&v.Checksums, f, true)
		case n == fieldOwner:
			v.Owner, err = text("owner", f)
		case n == fieldManifest:
			// Empty decodes as nil, as it was written; never the
			// caller's buffer, which may be the store's.
			v.Manifest = nil
			if len(f) > 0 {
				v.Manifest = append([]byte(nil), f...)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(id) != len(VersionID{}) {
		return nil, fmt.Errorf("row of %q: id of %d bytes", v.Key, len(id))
	}
	v.ID = VersionID(id)
	return v, nil
}

// fields calls fn with each field of the message b: its number, wire type,
// and value (x for a varint, f for a length-delimited field; other types
// are passed with neither).
func fields(b []byte, fn func(n protowire.Number, typ protowire.Type, x uint64, f []byte) error) error {
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
		var x uint64
		var f []byte
		switch typ {
		case protowire.VarintType:
			x, m = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f, m = protowire.ConsumeBytes(b)
		default:
			m = protowire.ConsumeFieldValue(n, typ, b)
		}
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
		if err := fn(n, typ, x, f); err != nil {
			return err
		}
	}
	return nil
}

// text decodes a proto3 string field.
func text(what string, f []byte) (string, error) {
	if !utf8.Valid(f) {
		return "", fmt.Errorf("%s is not UTF-8", what)
	}
	return string(f), nil
}

// decodeContent merges the Content message f into c.
func decodeContent(c *Content, f []byte) error {
	to := []*string{&c.Type, &c.Encoding, &c.Disposition, &c.Language, &c.CacheControl, &c.Expires}
	return fields(f, func(n protowire.Number, typ protowire.Type, _ uint64, f []byte) error {
		if typ == protowire.BytesType && n >= 1 && int(n) <= len(to) {
			*to[n-1] = string(f)
		}
		return nil
	})
}

// decodePOSIX merges the Posix message f into *p, making it if nil.
func decodePOSIX(p **POSIX, f []byte) error {
	if *p == nil {
		*p = new(POSIX)
	}
	q := *p
	return fields(f, func(n protowire.Number, typ protowire.Type, x uint64, f []byte) error {
		switch {
		case typ == protowire.VarintType && n == fieldPOSIXMode:
			q.Mode = uint32(x)
		case typ == protowire.VarintType && n == fieldPOSIXUID:
			q.UID = uint32(x)
		case typ == protowire.VarintType && n == fieldPOSIXGID:
			q.GID = uint32(x)
		case typ == protowire.VarintType && n == fieldPOSIXMtime:
			q.Mtime = time.Unix(0, int64(x)).UTC()
		case typ == protowire.BytesType && n == fieldPOSIXSymlink:
			q.Symlink = string(f)
		}
		return nil
	})
}

// decodeEntry adds the map entry f to *m, making the map if nil; a text
// map's values must be UTF-8, and every map's keys.
func decodeEntry(m *map[string]string, f []byte, textValues bool) error {
	var k, val string
	err := fields(f, func(n protowire.Number, typ protowire.Type, _ uint64, f []byte) (err error) {
		switch {
		case typ != protowire.BytesType:
		case n == fieldEntryKey:
			k, err = text("map key", f)
		case n == fieldEntryValue && textValues:
			val, err = text("map value", f)
		case n == fieldEntryValue:
			val = string(f)
		}
		return err
	})
	if err != nil {
		return err
	}
	if *m == nil {
		*m = make(map[string]string, 1)
	}
	(*m)[k] = val
	return nil
}
