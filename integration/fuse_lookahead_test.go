package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	mountfs "github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/object"
)

// The mount answers lookups made in listing order from pages of the
// listing it reads ahead. A write committed in the process (here over the
// core, as the S3 endpoint writes) must show at the next lookup all the
// same, the page notwithstanding: the kernel is told to trust names and
// attributes for an hour, so only the mount can be wrong.
func TestFUSELookupsInOrderSeeWritesAtOnce(t *testing.T) {
	f := newFUSEMount(t, mountfs.Options{})
	name := func(i int) string { return fmt.Sprintf("d/f%03d", i) }
	for i := range 40 {
		f.put(name(i), []byte("old"))
	}
	stat := func(i int) (os.FileInfo, error) { return os.Lstat(f.path(name(i))) }
	for i := range 5 { // a walk: the mount reads pages ahead of it
		if _, err := stat(i); err != nil {
			t.Fatal(err)
		}
	}
	f.put(name(6), []byte("newer"))
	if _, err := f.svc.Delete(f.ctx, "bkt", name(7), object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := stat(5); err != nil || fi.Size() != 3 {
		t.Fatalf("%s: %v, %v", name(5), fi, err)
	}
	if fi, err := stat(6); err != nil || fi.Size() != 5 {
		t.Fatalf("%s after a newer version was put: %v, %v; want 5 bytes", name(6), fi, err)
	}
	if _, err := stat(7); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after it was deleted: %v; want ENOENT", name(7), err)
	}
	for i := 8; i < 40; i++ {
		if fi, err := stat(i); err != nil || fi.Size() != 3 {
			t.Fatalf("%s: %v, %v", name(i), fi, err)
		}
	}
}

// Renames and creates check their names against the pages read ahead
// too: a write committed in the process after the page was read must
// decide them all the same.
func TestFUSEChangesInOrderSeeWritesAtOnce(t *testing.T) {
	f := newFUSEMount(t, mountfs.Options{})
	name := func(i int) string { return fmt.Sprintf("d/f%03d", i) }
	for i := range 40 {
		f.put(name(i), []byte("old"))
	}
	for i := range 5 { // a walk: the mount reads pages ahead of it
		if _, err := os.Lstat(f.path(name(i))); err != nil {
			t.Fatal(err)
		}
	}
	f.put(name(6), []byte("newer"))
	moved := name(6) + "-moved" // within the page, as name(6) is
	if err := os.Rename(f.path(name(6)), f.path(moved)); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(moved); string(got) != "newer" {
		t.Errorf("the rename moved %q, not the version put before it", got)
	}
	f.put("d/f007x", []byte("put"))
	_, err := os.OpenFile(f.path("d/f007x"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive create of a name put a moment before: %v, want EEXIST", err)
	}
}
