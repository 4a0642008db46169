package fs

import (
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestVersionsListingResumesAfterTheNullVersion: a page of
// .versions/<file> that ends on the null version resumes after that row
// whatever happens to it before the next page is read. The wire marker
// "null" would name the new null row that a PUT in a suspended bucket
// puts at the head, and list every version again; or, the row removed,
// resume at the next key and skip the older versions.
func TestVersionsListingResumesAfterTheNullVersion(t *testing.T) {
	for _, change := range []string{"replaced", "removed"} {
		t.Run(change, func(t *testing.T) {
			f, _, _ := newListedDir(t, 1)
			ctx := t.Context()
			put := func(state meta.Versioning, n int) {
				t.Helper()
				if _, err := f.svc.SetVersioning(ctx, "bkt", state); err != nil {
					t.Fatal(err)
				}
				for range n {
					if _, err := f.svc.Put(ctx, "bkt", "d/g", strings.NewReader(""), object.PutOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Newest first: MaxListKeys-1 versions, the null one (the
			// first page's last row), then two older ones.
			put(meta.Enabled, 2)
			put(meta.Suspended, 1)
			put(meta.Enabled, meta.MaxListKeys-1)
			v := &versionsDir{node: node{fsys: f}, key: "d/g"}
			fh, _, errno := v.OpendirHandle(ctx, 0)
			if errno != 0 {
				t.Fatal(errno)
			}
			h := fh.(*dirHandle)
			got := readRest(t, h, 2+meta.MaxListKeys) // . and .., then the first page
			want := len(got) + 2
			if change == "replaced" {
				put(meta.Suspended, 1)
			} else if _, err := f.svc.Delete(ctx, "bkt", "d/g", object.DeleteOptions{VersionID: meta.NullVersion}); err != nil {
				t.Fatal(err)
			}
			got = append(got, readRest(t, h, -1)...)
			seen := map[string]bool{}
			for _, name := range got {
				if seen[name] {
					t.Fatalf("%s listed twice", name)
				}
				seen[name] = true
			}
			if len(got) != want {
				t.Errorf("%d entries, want %d", len(got), want)
			}
		})
	}
}
