package gc_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
)

// fsck runs gc.Fsck and returns its findings as sorted lines.
func (f *fixture) fsck(repair bool) (*gc.Stats, []string) {
	f.t.Helper()
	var found []string
	st, err := gc.Fsck(f.ctx, f.svc, gc.FsckOptions{
		Repair: repair,
		Logger: quiet,
		Missing: func(m gc.Missing) {
			what := "missing"
			if errors.Is(m.Err, io.ErrUnexpectedEOF) {
				what = "short"
			}
			where := m.Key + "@" + f.names[m.VersionID]
			if m.UploadID != "" {
				where = m.Key + " part"
			}
			found = append(found, what+" "+where)
		},
		Orphan: func(o gc.Orphan) {
			found = append(found, "orphan "+f.names[o.Chunk.String()]+map[bool]string{true: " collectable"}[o.Collectable]+map[bool]string{true: " due"}[o.Due])
		},
	})
	if err != nil {
		f.t.Fatalf("fsck: %v", err)
	}
	slices.Sort(found)
	return st, found
}

// chunkPath is where the local store keeps a chunk.
func (f *fixture) chunkPath(id data.ChunkID) string {
	h := id.String()
	return filepath.Join(f.dir, "chunks", h[:2], h)
}

func TestFsck(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled)
	a1 := f.put("bkt", "a", "a1")
	f.put("bkt", "a", "a2")
	b1 := f.put("bkt", "b", "b1")
	c1 := f.put("bkt", "c", "c1")
	f.put("bkt", "ok", "ok1")
	u := f.upload("bkt", "up")
	p1 := f.part(u, 1, "p1")
	if _, st := f.fsck(false); len(st) != 0 {
		t.Fatalf("fsck of a sound store: %q", st)
	}

	// Damage: a noncurrent version's chunk and a live one's gone, a
	// chunk cut short, a part's chunk gone; and two orphans, one older
	// than the grace period.
	for _, id := range []data.ChunkID{chunksOf(t, a1)[1], chunksOf(t, b1)[0], partChunks(t, p1)[0]} {
		if err := os.Remove(f.chunkPath(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(f.chunkPath(chunksOf(t, c1)[2]), 1); err != nil {
		t.Fatal(err)
	}
	young, old := data.NewChunkID(), data.NewChunkID()
	for _, id := range []data.ChunkID{young, old} {
		if err := f.data.Put(f.ctx, id, []byte("nobody's")); err != nil {
			t.Fatal(err)
		}
	}
	f.names[young.String()], f.names[old.String()] = "young", "old"
	f.backdateChunk(old, 2*time.Hour)

	want := strings.Join([]string{
		"missing a@a1", "missing b@b1", "missing up part",
		"orphan old collectable", "orphan young", "short c@c1",
	}, "\n")
	st, found := f.fsck(false)
	if strings.Join(found, "\n") != want || st.Missing != 4 || st.Damaged != 4 || st.Condemned != 1 || st.Reclaimed != 0 {
		t.Fatalf("fsck found\n%s\nwant\n%s\n(%+v)", strings.Join(found, "\n"), want, st)
	}
	if !f.chunks()[old] {
		t.Fatal("fsck without repair removed an orphan")
	}

	// Repair condemns the old orphan, removes it a grace period later,
	// and leaves damaged rows and the young orphan be.
	if st, found = f.fsck(true); strings.Join(found, "\n") != want || st.Condemned != 1 || st.Reclaimed != 0 || !f.chunks()[old] {
		t.Fatalf("fsck --repair found %q (%+v)", found, st)
	}
	f.clock.set(f.clock.Now().Add(gc.DefaultGrace))
	due := strings.Replace(want, "old collectable", "old collectable due", 1)
	if st, found = f.fsck(false); strings.Join(found, "\n") != due || st.Reclaimed != 1 || !f.chunks()[old] {
		t.Fatalf("fsck a grace period later found %q (%+v)", found, st)
	}
	if st, found = f.fsck(true); strings.Join(found, "\n") != due || st.Reclaimed != 1 {
		t.Fatalf("fsck --repair a grace period later found %q (%+v)", found, st)
	}
	if left := f.chunks(); left[old] || !left[young] {
		t.Fatalf("after repair: old orphan kept %v, young orphan kept %v", left[old], left[young])
	}
	f.expectRows("bkt", "a=a2 a=a1 b=b1 c=c1 ok=ok1")
	st, found = f.fsck(false)
	if st.Missing != 4 || !slices.Contains(found, "orphan young") || slices.Contains(found, "orphan old collectable") {
		t.Fatalf("fsck after repair: %q", found)
	}
}
