package meta

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/stratafs/stratafs/meta/metapb"
)

func fullVersion() *Version {
	return &Version{
		Key:          "dir/ünïcode\x00file",
		ID:           NewVersionID(time.Unix(1700000000, 5)),
		Null:         true,
		Size:         1 << 40,
		ETag:         "0123456789abcdef0123456789abcdef-3",
		Content:      Content{Type: "text/plain", Encoding: "gzip", Disposition: "attachment; filename=\"na\xefve\"", Language: "fr", CacheControl: "no-cache", Expires: "Wed, 21 Oct 2015 07:28:00 GMT"},
		UserMeta:     map[string]string{"color": "blue", "raw": "\xff\xfe"},
		POSIX:        &POSIX{Mode: 0o100644, UID: 1000, GID: 100, Mtime: time.Unix(0, 0).UTC(), Symlink: "../t\xffarget"},
		StorageClass: "STANDARD_IA",
		Checksums:    map[string]string{"CRC32": "AAAAAA==", "SHA256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
		Owner:        "AKIAEXAMPLE",
		Manifest:     []byte{1, 2, 3, 0},
	}
}

func TestVersionRoundTrip(t *testing.T) {
	for _, v := range []*Version{
		fullVersion(),
		{Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true},
		{Key: "k", ID: NewVersionID(time.Now()), POSIX: &POSIX{Mode: 0o40755}},
	} {
		data, err := MarshalVersion(v)
		if err != nil {
			t.Fatalf("marshal %+v: %v", v, err)
		}
		got, err := UnmarshalVersion(data)
		if err != nil {
			t.Fatalf("unmarshal %+v: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, v)
		}
	}
}

func TestVersionAttrs(t *testing.T) {
	for _, v := range []*Version{
		fullVersion(),
		{Key: "k", ID: NewVersionID(time.Now()), Manifest: make([]byte, 4096)},
		{Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true},
	} {
		data, err := MarshalVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		attrs := VersionAttrs(data)
		if n := len(data) - len(attrs); len(v.Manifest) > 0 && n <= len(v.Manifest) {
			t.Errorf("%q: the attributes leave out %d bytes of a row whose manifest has %d", v.Key, n, len(v.Manifest))
		}
		got, err := UnmarshalVersion(attrs)
		if err != nil {
			t.Fatalf("%q: unmarshal the attributes: %v", v.Key, err)
		}
		want := *v
		want.Manifest = nil
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("attributes:\n got %+v\nwant %+v", got, &want)
		}
	}
	// What cannot be parsed is left whole, for the decoder to refuse.
	bad := []byte{0x0a, 0x7f, 'k'}
	if got := VersionAttrs(bad); string(got) != string(bad) {
		t.Errorf("a malformed row became %x", got)
	}
}

func TestIsNullRow(t *testing.T) {
	null := fullVersion() // null, and with a manifest long enough to keep apart
	versioned := *null
	versioned.Null = false
	for _, c := range []struct {
		v    *Version
		want bool
	}{{null, true}, {&versioned, false}} {
		row, err := MarshalVersion(c.v)
		if err != nil {
			t.Fatal(err)
		}
		apart, err := MarshalVersionApart(c.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][]byte{row, apart} {
			if got, err := IsNullRow(r); got != c.want || err != nil {
				t.Errorf("IsNullRow(row of Null %v) = %v, %v", c.v.Null, got, err)
			}
		}
	}
	// The last of repeated fields wins, as protobuf decodes them.
	row, _ := MarshalVersion(&versioned)
	row = protowire.AppendVarint(protowire.AppendTag(row, fieldNull, protowire.VarintType), 1)
	if got, err := IsNullRow(row); !got || err != nil {
		t.Errorf("IsNullRow(row ending in null = 1) = %v, %v", got, err)
	}
	if _, err := IsNullRow([]byte{0x0a, 0x7f}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("IsNullRow(truncated row) = %v, want ErrCorrupt", err)
	}
}

func TestManifestApart(t *testing.T) {
	for _, v := range []*Version{
		fullVersion(),
		{Key: "k", ID: NewVersionID(time.Now()), Manifest: bytes.Repeat([]byte{7}, 4096)},
	} {
		row, err := MarshalVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		marked, err := MarshalVersionApart(v)
		if err != nil {
			t.Fatal(err)
		}
		if !IsApart(marked) || IsApart(row) {
			t.Errorf("%q: IsApart(marked) = %v, IsApart(row) = %v", v.Key, IsApart(marked), IsApart(row))
		}
		if attrs := VersionAttrs(row); len(marked) != len(attrs)+2 || !bytes.HasPrefix(marked, attrs) {
			t.Errorf("%q: marked row of %d bytes, want the %d of its attributes and a mark of 2", v.Key, len(marked), len(attrs))
		}
		// Read without its manifest, the row is refused, not empty.
		if got, err := UnmarshalVersion(marked); err == nil {
			t.Errorf("%q: a row marked apart decoded, manifest %d bytes", v.Key, len(got.Manifest))
		}
		// Its attributes and the manifest kept apart are the row.
		got, err := UnmarshalVersion(VersionAttrs(marked))
		if err != nil {
			t.Fatalf("%q: the attributes of a row marked apart: %v", v.Key, err)
		}
		got.Manifest = v.Manifest
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%q: marked apart and joined:\n got %+v\nwant %+v", v.Key, got, v)
		}
	}
	// A row without a manifest has nothing to keep apart.
	marker := &Version{Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true}
	if _, err := MarshalVersionApart(marker); err == nil {
		t.Error("a delete marker was marked apart")
	}
	if row, err := MarshalVersion(marker); err != nil || IsApart(row) {
		t.Errorf("a delete marker's row: IsApart, %v", err)
	}
	// A row whose last field ends in the mark's bytes is not marked.
	marker.Owner = "own\x6a\x00"
	if row, err := MarshalVersion(marker); err != nil || !bytes.HasSuffix(row, apartMark) || IsApart(row) {
		t.Errorf("a row ending in the mark's bytes: IsApart %v, suffix %x, %v", IsApart(row), row[len(row)-2:], err)
	}
}

func TestMarshalVersionRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Version)
		want error
	}{
		{"empty key", func(v *Version) { v.Key = "" }, ErrInvalidKey},
		{"non-UTF-8 key", func(v *Version) { v.Key = "\xff" }, ErrInvalidKey},
		{"zero id", func(v *Version) { v.ID = VersionID{} }, ErrInvalidVersionID},
		{"negative size", func(v *Version) { v.Size = -1 }, ErrInvalidArgument},
		{"mtime out of range", func(v *Version) { v.POSIX.Mtime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrInvalidArgument},
		{"non-UTF-8 metadata name", func(v *Version) { v.UserMeta["\xff"] = "x" }, ErrInvalidArgument},
		{"listed without its manifest", func(v *Version) { v.Manifest, v.NoManifest = nil, true }, ErrInvalidArgument},
	} {
		v := fullVersion()
		c.edit(v)
		if _, err := MarshalVersion(v); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestUnmarshalVersionRejects(t *testing.T) {
	// Field 2 (id) of 15 bytes, field 1 (key) "k".
	short := append([]byte{0x0a, 1, 'k', 0x12, 15}, make([]byte, 15)...)
	for name, data := range map[string][]byte{
		"garbage":  {0xff, 0xff, 0xff},
		"empty":    nil,
		"short id": short,
	} {
		if _, err := UnmarshalVersion(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func TestBucketRoundTrip(t *testing.T) {
	for _, b := range []Bucket{
		{Name: "photos", ID: math.MaxUint64, Created: time.Unix(1700000000, 1).UTC(), Versioning: Suspended, Owner: "AKIA", Shards: 64},
		{Name: "epoch", ID: 1, Created: time.Unix(0, 0).UTC()},
		{Name: "zero"},
		{Name: "rules", Lifecycle: []LifecycleRule{
			{ID: "all", Enabled: true, NoncurrentDays: 30, NewerNoncurrentVersions: 3, ExpiredObjectDeleteMarker: true},
			{ID: "logs", Prefix: "logs/\x00ünï", ExpirationDays: math.MaxInt32, AbortIncompleteUploadDays: 7},
		}},
	} {
		data, err := MarshalBucket(b)
		if err != nil {
			t.Fatalf("marshal %+v: %v", b, err)
		}
		got, err := UnmarshalBucket(data)
		if err != nil {
			t.Fatalf("unmarshal %+v: %v", b, err)
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("round trip: got %+v, want %+v", got, b)
		}
	}
	if _, err := MarshalBucket(Bucket{Name: "b", Versioning: 7}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("versioning 7: got %v, want ErrInvalidArgument", err)
	}
	// Field 4 (versioning) = 3, field 1 (name) "b".
	if _, err := UnmarshalBucket([]byte{0x0a, 1, 'b', 0x20, 3}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("versioning 3: got %v, want ErrCorrupt", err)
	}
}

// FuzzUnmarshalVersion feeds arbitrary bytes to the row decoder.
func FuzzUnmarshalVersion(f *testing.F) {
	f.Add([]byte{0x0a, 1, 'k', 0x12, 0})
	// Checksums (field 11) as a varint: protobuf decodes it as an empty,
	// non-nil map, which used to survive only the first round.
	f.Add(append(append([]byte{0x0a, 1, 'k', 0x12, 16, 1}, make([]byte, 15)...), 0x58, 0))
	fuzzDecoder(f, MarshalVersion, UnmarshalVersion,
		fullVersion(), &Version{Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true})
}

// fuzzDecoder fuzzes a record decoder, seeded with the encodings of
// seeds: it must never panic, must reject only with ErrCorrupt, and
// whatever it accepts must marshal and decode back to the same record.
func fuzzDecoder[T any](f *testing.F, marshal func(T) ([]byte, error), unmarshal func([]byte) (T, error), seeds ...T) {
	for _, r := range seeds {
		data, err := marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := unmarshal(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := marshal(r)
		if err != nil {
			t.Fatalf("marshal of a decoded record %+v: %v", r, err)
		}
		r2, err := unmarshal(again)
		if err != nil {
			t.Fatalf("decode of a marshaled record: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", r2, r)
		}
	})
}

const testUploadID = "0123456789abcdef0123456789abcdef"

// fullUpload returns an upload with every field set, in state Completing.
func fullUpload() *Upload {
	tpl := fullVersion()
	tpl.ID, tpl.Null, tpl.Size, tpl.ETag, tpl.Manifest = VersionID{}, false, 0, "", nil
	return &Upload{
		Key:       tpl.Key,
		ID:        testUploadID,
		Initiated: time.Unix(1700000000, 7).UTC(),
		State:     Completing,
		Template:  tpl,
		Version:   NewVersionID(time.Unix(1700000001, 0)),
		ETag:      "0123456789abcdef0123456789abcdef-2",

		FullObjectChecksum: true,
	}
}

func fullPart() *Part {
	return &Part{
		Number:    MaxParts,
		Size:      5 << 20,
		ETag:      "0123456789abcdef0123456789abcdef",
		Modified:  time.Unix(1700000000, 9).UTC(),
		Checksums: map[string]string{"CRC32": "AAAAAA=="},
		Manifest:  []byte{0, 1, 2},
	}
}

func fullAccessKey() AccessKey {
	return AccessKey{ID: "AKIAIOSFODNN7EXAMPLE", Secret: "wJalrXUtnFEMI/K7MDENG", Name: "Zoë", Created: time.Unix(0, 0).UTC(), Root: true}
}

func TestUploadRoundTrip(t *testing.T) {
	uploading := &Upload{Key: "k", ID: NewUploadID(time.Now()), Initiated: time.Now().UTC(), Template: &Version{Key: "k"}}
	for _, u := range []*Upload{fullUpload(), uploading, {Key: "bare", ID: testUploadID}} {
		data, err := MarshalUpload(u)
		if err != nil {
			t.Fatalf("marshal %+v: %v", u, err)
		}
		got, err := UnmarshalUpload(data)
		if err != nil {
			t.Fatalf("unmarshal %+v: %v", u, err)
		}
		if !reflect.DeepEqual(got, u) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, u)
		}
	}
}

func TestMarshalUploadRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Upload)
		want error
	}{
		{"invalid key", func(u *Upload) { u.Key, u.Template.Key = "\xff", "\xff" }, ErrInvalidKey},
		{"short id", func(u *Upload) { u.ID = u.ID[1:] }, ErrInvalidArgument},
		{"id not hex", func(u *Upload) { u.ID = "z" + u.ID[1:] }, ErrInvalidArgument},
		{"unknown state", func(u *Upload) { u.State = Completed + 1 }, ErrInvalidArgument},
		{"completing without a version id", func(u *Upload) { u.Version = VersionID{} }, ErrInvalidArgument},
		{"template of another key", func(u *Upload) { u.Template.Key = "other" }, ErrInvalidArgument},
		{"template of negative size", func(u *Upload) { u.Template.Size = -1 }, ErrInvalidArgument},
		{"template mtime out of range", func(u *Upload) { u.Template.POSIX.Mtime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrInvalidArgument},
		{"template metadata name not UTF-8", func(u *Upload) { u.Template.UserMeta["\xff"] = "x" }, ErrInvalidArgument},
		{"initiated out of range", func(u *Upload) { u.Initiated = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrInvalidArgument},
	} {
		u := fullUpload()
		c.edit(u)
		if _, err := MarshalUpload(u); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := MarshalUpload(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil upload: got %v, want ErrInvalidArgument", err)
	}
}

func TestUnmarshalUploadRejects(t *testing.T) {
	id := NewVersionID(time.Now())
	for name, pb := range map[string]*metapb.Upload{
		"invalid key":             {Key: "", Id: testUploadID},
		"invalid id":              {Key: "k", Id: "x"},
		"unknown state":           {Key: "k", Id: testUploadID, State: 3, Version: id[:]},
		"state beyond a byte":     {Key: "k", Id: testUploadID, State: 256, Version: id[:]},
		"completed without id":    {Key: "k", Id: testUploadID, State: uint32(Completed)},
		"version id of 15 bytes":  {Key: "k", Id: testUploadID, Version: id[1:]},
		"template id of 15 bytes": {Key: "k", Id: testUploadID, Template: &metapb.Version{Key: "k", Id: id[1:]}},
		"template of another key": {Key: "k", Id: testUploadID, Template: &metapb.Version{Key: "j", Id: id[:]}},
	} {
		data, err := proto.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalUpload(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := UnmarshalUpload([]byte{0xff, 0xff}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage: got %v, want ErrCorrupt", err)
	}
}

func TestPartRoundTrip(t *testing.T) {
	for _, p := range []*Part{fullPart(), {Number: 1}} {
		data, err := MarshalPart(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		got, err := UnmarshalPart(data)
		if err != nil {
			t.Fatalf("unmarshal %+v: %v", p, err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, p)
		}
	}
}

func TestPartRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Part)
	}{
		{"part 0", func(p *Part) { p.Number = 0 }},
		{"part -1", func(p *Part) { p.Number = -1 }},
		{"part above MaxParts", func(p *Part) { p.Number = MaxParts + 1 }},
		{"negative size", func(p *Part) { p.Size = -1 }},
		{"modified out of range", func(p *Part) { p.Modified = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"checksum name not UTF-8", func(p *Part) { p.Checksums["\xff"] = "x" }},
	} {
		p := fullPart()
		c.edit(p)
		if _, err := MarshalPart(p); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("marshal, %s: got %v, want ErrInvalidArgument", c.name, err)
		}
	}
	for _, n := range []int32{0, MaxParts + 1} {
		data, err := proto.Marshal(&metapb.Part{Number: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalPart(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("unmarshal part %d: got %v, want ErrCorrupt", n, err)
		}
	}
}

func TestAccessKeyRoundTrip(t *testing.T) {
	for _, k := range []AccessKey{fullAccessKey(), {ID: "a", Secret: "s"}} {
		data, err := MarshalAccessKey(k)
		if err != nil {
			t.Fatalf("marshal %+v: %v", k, err)
		}
		if got, err := UnmarshalAccessKey(data); err != nil || got != k {
			t.Errorf("round trip: got %+v, %v; want %+v", got, err, k)
		}
	}
}

func TestAccessKeyRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*AccessKey)
	}{
		{"empty id", func(k *AccessKey) { k.ID = "" }},
		{"empty secret", func(k *AccessKey) { k.Secret = "" }},
		{"name not UTF-8", func(k *AccessKey) { k.Name = "\xff" }},
	} {
		k := fullAccessKey()
		c.edit(&k)
		if _, err := MarshalAccessKey(k); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("marshal, %s: got %v, want ErrInvalidArgument", c.name, err)
		}
	}
	data, err := proto.Marshal(&metapb.AccessKey{Id: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalAccessKey(data); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unmarshal without a secret: got %v, want ErrCorrupt", err)
	}
}

func FuzzUnmarshalUpload(f *testing.F) {
	fuzzDecoder(f, MarshalUpload, UnmarshalUpload, fullUpload(), &Upload{Key: "k", ID: testUploadID})
}

func FuzzUnmarshalPart(f *testing.F) {
	f.Add([]byte{0x08, 1, 0x28, 0}) // checksums (field 5) as a varint, as in FuzzUnmarshalVersion
	fuzzDecoder(f, MarshalPart, UnmarshalPart, fullPart(), &Part{Number: 1})
}

func FuzzUnmarshalAccessKey(f *testing.F) {
	fuzzDecoder(f, MarshalAccessKey, UnmarshalAccessKey, fullAccessKey())
}

// fullVersionPB is v, a fullVersion, as protobuf's own types hold it.
func fullVersionPB(v *Version) *metapb.Version {
	mtime := int64(0)
	return &metapb.Version{
		Key: v.Key, Id: v.ID[:], Null: true, Size: 1 << 40, Etag: v.ETag,
		Content: &metapb.Content{
			Type: []byte("text/plain"), Encoding: []byte("gzip"), Disposition: []byte("attachment; filename=\"na\xefve\""),
			Language: []byte("fr"), CacheControl: []byte("no-cache"), Expires: []byte("Wed, 21 Oct 2015 07:28:00 GMT"),
		},
		UserMeta:     map[string][]byte{"color": []byte("blue"), "raw": []byte("\xff\xfe")},
		Posix:        &metapb.Posix{Mode: 0o100644, Uid: 1000, Gid: 100, MtimeUnixNanos: &mtime, Symlink: []byte("../t\xffarget")},
		StorageClass: "STANDARD_IA",
		Checksums:    v.Checksums,
		Owner:        "AKIAEXAMPLE",
		Manifest:     v.Manifest,
	}
}

// The hand-written row codec is protobuf's encoding of metapb.Version:
// its bytes are what the protobuf runtime writes, and it reads what the
// runtime writes.
func TestVersionIsProtobuf(t *testing.T) {
	// The second has embedded messages of 2 and 3 bytes of length: a
	// symlink target of 200 bytes, a 20,000-byte metadata value.
	long := fullVersion()
	long.POSIX.Symlink = strings.Repeat("t", 200)
	long.UserMeta["big"] = strings.Repeat("v", 20000)
	for _, full := range []*Version{fullVersion(), long} {
		pb := fullVersionPB(full)
		pb.Posix.Symlink = []byte(full.POSIX.Symlink)
		pb.UserMeta["big"] = []byte(full.UserMeta["big"])
		if full.UserMeta["big"] == "" {
			delete(pb.UserMeta, "big")
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalVersion(full)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encoding:\n got %x\nwant %x", got, want)
		}
		v, err := UnmarshalVersion(want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, full) {
			t.Errorf("decoded:\n got %+v\nwant %+v", v, full)
		}
	}

	fields := (&metapb.Version{}).ProtoReflect().Descriptor().Fields()
	for name, n := range map[protoreflect.Name]protowire.Number{
		"key": fieldKey, "id": fieldID, "null": fieldNull, "delete_marker": fieldDeleteMarker, "size": fieldSize,
		"etag": fieldETag, "content": fieldContent, "user_meta": fieldUserMeta, "posix": fieldPOSIX,
		"storage_class": fieldStorageClass, "checksums": fieldChecksums, "owner": fieldOwner, "manifest": fieldManifest,
	} {
		if f := fields.ByName(name); f == nil || f.Number() != n {
			t.Errorf("field %s is number %d here, %v in meta.proto", name, n, f)
		}
	}
	posix := (&metapb.Posix{}).ProtoReflect().Descriptor().Fields()
	for name, n := range map[protoreflect.Name]protowire.Number{
		"mode": fieldPOSIXMode, "uid": fieldPOSIXUID, "gid": fieldPOSIXGID, "mtime_unix_nanos": fieldPOSIXMtime, "symlink": fieldPOSIXSymlink,
	} {
		if f := posix.ByName(name); f == nil || f.Number() != n {
			t.Errorf("posix field %s is number %d here, %v in meta.proto", name, n, f)
		}
	}
}

// Encodings protobuf accepts that no encoder of ours writes decode as
// protobuf decodes them: repeated scalars (the last wins), repeated
// messages (merged), fields out of order, unknown fields and known ones
// of another wire type (skipped).
func TestUnmarshalVersionLikeProtobuf(t *testing.T) {
	row, err := MarshalVersion(fullVersion())
	if err != nil {
		t.Fatal(err)
	}
	tag := func(n protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, n, typ) }
	str := func(n protowire.Number, s string) []byte {
		return protowire.AppendString(tag(n, protowire.BytesType), s)
	}
	num := func(n protowire.Number, x uint64) []byte {
		return protowire.AppendVarint(tag(n, protowire.VarintType), x)
	}
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for name, data := range map[string][]byte{
		"repeated key":        join(str(fieldKey, "old"), row),
		"posix merged":        join(row, str(fieldPOSIX, string(num(fieldPOSIXUID, 7)))),
		"content merged":      join(row, str(fieldContent, string(str(2, "br")))),
		"unknown fields":      join(num(99, 5), row, str(100, "x"), protowire.AppendFixed32(tag(101, protowire.Fixed32Type), 1)),
		"wrong wire types":    join(row, num(fieldChecksums, 1), num(fieldKey, 3), str(fieldSize, "x")),
		"fields out of order": join(num(fieldSize, 9), str(fieldManifest, "m"), str(fieldOwner, "o"), row),
		"negative size":       join(row, num(fieldSize, math.MaxUint64)),
		"map entry no value":  join(row, str(fieldUserMeta, string(str(fieldEntryKey, "empty")))),
		"empty manifest last": join(row, str(fieldManifest, "")),
	} {
		var pb metapb.Version
		if err := proto.Unmarshal(data, &pb); err != nil {
			t.Fatalf("%s: protobuf refuses it: %v", name, err)
		}
		canon, err := proto.Marshal(&pb)
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := decodeVersion(data)
		want, werr := decodeVersion(canon)
		if gerr != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v (%v)\nwant %+v (%v)", name, got, gerr, want, werr)
		}
	}
}

// FuzzVersionLikeProtobuf checks the row decoder against protobuf's on
// arbitrary bytes: each refuses what the other does (a row must also
// have an id of 16 bytes), and what they accept decodes to the row that
// protobuf's own re-encoding of it decodes to.
func FuzzVersionLikeProtobuf(f *testing.F) {
	for _, v := range []*Version{fullVersion(), {Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true}} {
		data, err := MarshalVersion(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var pb metapb.Version
		perr := proto.Unmarshal(data, &pb)
		v, err := decodeVersion(data)
		switch {
		case perr == nil && len(pb.Id) != len(VersionID{}):
			if err == nil {
				t.Fatalf("a row with an id of %d bytes decoded", len(pb.Id))
			}
			return
		case (perr == nil) != (err == nil):
			t.Fatalf("protobuf says %v, the row decoder %v", perr, err)
		case perr != nil:
			return
		}
		canon, err := proto.Marshal(&pb)
		if err != nil {
			t.Fatal(err)
		}
		w, err := decodeVersion(canon)
		if err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("decoded:\n got %+v\nwant %+v (%v)", v, w, err)
		}
	})
}
