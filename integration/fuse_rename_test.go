package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestFUSERenamedFilesOutliveTheirHistory renames small files twice and
// changes their mode in the mount. For a committed file, such as one put
// from outside, the rows this writes name the row whose bytes they share,
// and read the entry the meta store keeps beside that row, with no copy
// (a file the mount wrote and has not committed yet is passed whole).
// Then every version but the latest is removed, as S3's
// DeleteObject with a version id does, and the files read back whole,
// through the object core and through .versions: the bytes go with the
// last row that reads them, not with the row that wrote them. It fails
// when the entry goes with its first reader but one.
func TestFUSERenamedFilesOutliveTheirHistory(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	want := map[string][]byte{}
	for i := range 20 {
		b := make([]byte, 600+170*i) // kept apart from the row, up to 3.8 KB
		rand.Read(b)
		name := fmt.Sprint("f", i)
		if i%2 == 0 {
			f.write(name, b)
		} else { // known to the mount only by what it lists
			f.put(name, b)
		}
		for _, step := range []func() error{
			func() error { return os.Rename(f.path(name), f.path("r"+name)) },
			func() error { return os.Rename(f.path("r"+name), f.path("s"+name)) },
			func() error { return os.Chmod(f.path("s"+name), 0o600) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		want["s"+name] = b
	}
	f.settle()

	res, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{MaxKeys: 1000})
	if err != nil || res.IsTruncated {
		t.Fatalf("list versions: %v (truncated: %v)", err, res.IsTruncated)
	}
	removed := 0
	for _, e := range res.Versions {
		if e.IsLatest && want[e.Key] != nil {
			continue
		}
		if _, err := f.svc.Delete(f.ctx, "bkt", e.Key, object.DeleteOptions{VersionID: e.WireID()}); err != nil {
			t.Fatal(err)
		}
		removed++
	}
	// Per file: the first row and its marker, the first rename's row and
	// its marker, and the second rename's row unless the chmod, queued
	// behind it, took its place before it was committed.
	if removed < 4*len(want) {
		t.Fatalf("removed %d versions, want at least %d", removed, 4*len(want))
	}

	for key, b := range want {
		o, err := f.svc.Get(f.ctx, "bkt", key, "", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o.Body)
		o.Body.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("get %s: %d bytes (%v), want its %d", key, len(got), err, len(b))
		}
		versions := f.names(".versions/" + key)
		if len(versions) != 1 {
			t.Fatalf(".versions/%s lists %q, want the one version left", key, versions)
		}
		if got := f.read(".versions/" + key + "/" + versions[0]); !bytes.Equal(got, b) {
			t.Fatalf(".versions/%s/%s: %d bytes, not the file's %d", key, versions[0], len(got), len(b))
		}
		if st, err := os.Stat(f.path(key)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("stat %s: %v, %v", key, st.Mode(), err)
		}
	}
}
