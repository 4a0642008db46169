package meta

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
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
	} {
		data, err := MarshalBucket(b)
		if err != nil {
			t.Fatalf("marshal %+v: %v", b, err)
		}
		got, err := UnmarshalBucket(data)
		if err != nil {
			t.Fatalf("unmarshal %+v: %v", b, err)
		}
		if got != b {
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

// FuzzUnmarshalVersion feeds arbitrary bytes to the row decoder: it must
// never panic, and whatever it accepts must marshal and decode back to
// the same row.
func FuzzUnmarshalVersion(f *testing.F) {
	for _, v := range []*Version{fullVersion(), {Key: "k", ID: NewVersionID(time.Now()), DeleteMarker: true}} {
		data, err := MarshalVersion(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0x0a, 1, 'k', 0x12, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := UnmarshalVersion(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := MarshalVersion(v)
		if err != nil {
			t.Fatalf("marshal of a decoded row %+v: %v", v, err)
		}
		w, err := UnmarshalVersion(again)
		if err != nil {
			t.Fatalf("decode of a marshaled row: %v", err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", w, v)
		}
	})
}
