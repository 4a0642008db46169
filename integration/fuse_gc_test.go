package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/object"
)

// TestFUSEOpenFileSurvivesCollections: a file held open in the mount keeps
// reading its version after that version is deleted by id, through
// collections in the same process, and lets the collector have its
// chunks once closed (the handle's release gives them back).
func TestFUSEOpenFileSurvivesCollections(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	body := fuseRandom(40 * fuseChunk) // far more than the kernel reads ahead
	v := f.put("k", body)
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	ids := m.ChunkIDs()
	file, err := os.Open(f.path("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	p := make([]byte, 1000)
	if _, err := file.ReadAt(p, 0); err != nil || !bytes.Equal(p, body[:1000]) {
		t.Fatalf("first read: %v", err)
	}
	if _, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{VersionID: v.WireID()}); err != nil {
		t.Fatal(err)
	}
	collect := func() *gc.Stats {
		t.Helper()
		st, err := gc.Run(f.ctx, f.svc, gc.Options{Grace: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for range 2 {
		if st := collect(); st.Reclaimed != 0 || st.Condemned != 0 {
			t.Fatalf("a collection took the chunks of an open file: %+v", st)
		}
	}
	got, err := io.ReadAll(io.NewSectionReader(file, 0, 1<<30))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the open file read %d bytes (%v) after collections, want %d", len(got), err, len(body))
	}
	file.Close()
	fuseEventually(t, "the released handle's chunks", func() error {
		for _, id := range ids {
			if f.svc.Reading(id) {
				return fmt.Errorf("chunk %s still held", id)
			}
		}
		return nil
	})
	collect() // condemns
	if st := collect(); st.Reclaimed != int64(len(ids)) {
		t.Fatalf("collections after the close reclaimed %d chunks, want the version's %d", st.Reclaimed, len(ids))
	}
	var b [1]byte
	if _, err := f.svc.Data().ReadAt(f.ctx, ids[0], b[:], 0); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("a chunk of the deleted version after collection: %v", err)
	}
}
