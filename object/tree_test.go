package object_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

func TestStatSeesFilesDirectoriesAndMarkers(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	for _, k := range []string{"a", "a-b", "a/x", "d/", "e/f", "g"} {
		f.put(k, []byte(k))
	}
	for _, k := range []string{"e/f", "g"} {
		if _, err := f.svc.Delete(f.ctx, "bkt", k, object.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		key               string
		file, dir, marker bool
		history           bool
	}{
		{key: "a", file: true, dir: true},
		{key: "a-b", file: true},
		{key: "d", dir: true, marker: true},
		{key: "e"},
		{key: "e", dir: true, history: true},
		{key: "g"},
		{key: "g", file: true, history: true},
		{key: "zz"},
	} {
		stat := f.svc.Stat
		if c.history {
			stat = f.svc.StatHistory
		}
		n, err := stat(f.ctx, "bkt", c.key)
		if err != nil {
			t.Fatalf("stat %s: %v", c.key, err)
		}
		if (n.File != nil) != c.file || n.Dir != c.dir || (n.Marker != nil) != c.marker {
			t.Errorf("stat %s (history %v) = file %v dir %v marker %v; want %v %v %v",
				c.key, c.history, n.File != nil, n.Dir, n.Marker != nil, c.file, c.dir, c.marker)
		}
	}
	if n, _ := f.svc.StatHistory(f.ctx, "bkt", "g"); !n.File.DeleteMarker {
		t.Errorf("history of a deleted key: %+v, want its delete marker", n.File)
	}
}

func TestVersionAtSeeksToTheVersionOfAnInstant(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v1 := f.put("k", []byte("one"))
	v2 := f.put("k", []byte("two"))
	res, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{v1.LastModified(), v1.WireID()},
		{v2.LastModified().Add(-time.Nanosecond), v1.WireID()},
		{v2.LastModified(), v2.WireID()},
		{time.Now().Add(time.Hour), res.VersionID},
	} {
		v, err := f.svc.VersionAt(f.ctx, "bkt", "k", c.at)
		if err != nil || v.WireID() != c.want {
			t.Errorf("version at %s = %v, %v; want %s", c.at, v, err, c.want)
		}
	}
	if _, err := f.svc.VersionAt(f.ctx, "bkt", "k", v1.LastModified().Add(-time.Nanosecond)); !errors.Is(err, meta.ErrNoSuchVersion) {
		t.Errorf("before the first version: %v, want ErrNoSuchVersion", err)
	}
}

func TestRenamePrefixMovesATreeInOneCommitWithoutCopying(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	bodies := map[string][]byte{"a/": nil, "a/1": randBytes(2 * chunk), "a/sub/2": randBytes(10), "a-b": randBytes(3)}
	for k, b := range bodies {
		f.put(k, b)
	}
	chunks := f.chunks()

	if _, err := f.svc.RenamePrefix(f.ctx, "bkt", "a/", "b/", "", 2); !errors.Is(err, object.ErrTooManyKeys) {
		t.Fatalf("rename past the limit: %v, want ErrTooManyKeys", err)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "b/", ""); !meta.IsNotFound(err) {
		t.Fatalf("a refused rename wrote b/: %v", err)
	}
	for _, c := range [][2]string{{"a/", "a/x/"}, {"a/x/", "a/"}, {"a", "b/"}} {
		if _, err := f.svc.RenamePrefix(f.ctx, "bkt", c[0], c[1], "", 10); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("rename %s to %s: %v, want ErrInvalidArgument", c[0], c[1], err)
		}
	}
	if _, err := f.svc.RenamePrefix(f.ctx, "bkt", "none/", "b/", "", 10); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("rename of an empty prefix: %v, want ErrNoSuchKey", err)
	}

	n, err := f.svc.RenamePrefix(f.ctx, "bkt", "a/", "b/", "", 3)
	if err != nil || n != 3 {
		t.Fatalf("rename = %d, %v", n, err)
	}
	for k, b := range bodies {
		if k == "a-b" {
			continue
		}
		moved := "b/" + k[len("a/"):]
		if got := f.mustRead(moved, ""); !bytes.Equal(got, b) {
			t.Errorf("%s: bytes differ", moved)
		}
		if _, err := f.svc.Head(f.ctx, "bkt", k, ""); !errors.Is(err, meta.ErrNoSuchKey) {
			t.Errorf("source %s still there: %v", k, err)
		}
	}
	if got := f.mustRead("a-b", ""); !bytes.Equal(got, bodies["a-b"]) {
		t.Errorf("a key beside the prefix changed")
	}
	if f.chunks() != chunks {
		t.Errorf("rename wrote chunks: %d, had %d", f.chunks(), chunks)
	}
}

func TestUpdateAttrsSharesTheBytes(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(chunk + 1)
	old, err := f.svc.Put(f.ctx, "bkt", "k", bytes.NewReader(body), object.PutOptions{
		Size:  -1,
		Attrs: object.Attrs{UserMeta: map[string]string{"color": "red"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.svc.UpdateAttrs(f.ctx, "bkt", "k", func(head *meta.Version, a *object.Attrs) error {
		if head.ID != old.ID {
			t.Errorf("fn saw %s, want %s", head.WireID(), old.WireID())
		}
		a.UserMeta["shape"] = "round"
		a.POSIX = &meta.POSIX{Mode: 0o100600, UID: 7}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.ID == old.ID || v.ETag != old.ETag || !bytes.Equal(v.Manifest, old.Manifest) {
		t.Errorf("new version %s etag %s does not share %s", v.WireID(), v.ETag, old.WireID())
	}
	if v.POSIX.Mode != 0o100600 || v.UserMeta["color"] != "red" || v.UserMeta["shape"] != "round" {
		t.Errorf("attributes %+v %v", v.POSIX, v.UserMeta)
	}
	if prev, _ := f.svc.Head(f.ctx, "bkt", "k", old.WireID()); len(prev.UserMeta) != 1 || prev.POSIX != nil {
		t.Errorf("the old version changed: %+v %v", prev.POSIX, prev.UserMeta)
	}
	if got := f.mustRead("k", ""); !bytes.Equal(got, body) {
		t.Error("bytes differ")
	}
	if _, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateAttrs(f.ctx, "bkt", "k", func(*meta.Version, *object.Attrs) error { return nil }); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("update of a deleted key: %v, want ErrNoSuchKey", err)
	}
}
