package gc_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestReaderInAnotherProcess: gateways share the meta and chunk stores;
// each is an object.Service of its own. A version removed while a reader
// on one gateway holds it open keeps its chunks for the grace period
// after the first collection that found them unreferenced, whichever
// gateway collects: the chunks are condemned in the meta store, and only
// a run the grace period later deletes them. A condemned chunk that a
// new row shares again is pardoned. It runs on mem, on bolt and, when
// STRATAFS_CASSANDRA is set, on Cassandra.
func TestReaderInAnotherProcess(t *testing.T) {
	onEachStore(t, readerInAnotherProcess)
}

func readerInAnotherProcess(t *testing.T, store ...func(meta.Store) meta.Store) {
	f := newFixture(t, store...)
	opts := object.Options{Now: f.clock.Now, ChunkSize: chunkSize, InlineMax: inlineMax}
	reader := object.New(f.meta, f.data, opts)                               // the gateway serving the reader
	collectors := []*object.Service{f.svc, object.New(f.meta, f.data, opts)} // the others, taking turns
	f.bucket("bkt", meta.Enabled)
	removed := f.put("bkt", "k", "v1")
	f.put("bkt", "k", "v2")
	shared := f.put("bkt", "s", "s1") // removed, then shared again by a new row

	stream, _, err := reader.Open(f.ctx, removed, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	ra, err := reader.ReaderAt(f.ctx, removed)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	for _, v := range []*meta.Version{removed, shared} {
		if _, err := f.svc.Delete(f.ctx, "bkt", v.Key, object.DeleteOptions{VersionID: v.WireID()}); err != nil {
			t.Fatal(err)
		}
	}
	f.backdate(2 * time.Hour) // the chunks are old: the grace period on their age is no help
	ids := append(chunksOf(t, removed), chunksOf(t, shared)...)

	run := func(i int, minutes int) *gc.Stats {
		t.Helper()
		f.at(0, 1, minutes)
		st, err := gc.Run(f.ctx, collectors[i%2], gc.Options{Logger: quiet})
		if err != nil {
			t.Fatalf("run %d at +%dm: %v", i, minutes, err)
		}
		return st
	}
	expectChunks := func(when string, want map[data.ChunkID]bool) {
		t.Helper()
		left := f.chunks()
		for _, id := range ids {
			if left[id] != want[id] {
				t.Fatalf("%s: chunk %s present %v, want %v", when, id, left[id], want[id])
			}
		}
	}
	all := map[data.ChunkID]bool{}
	for _, id := range ids {
		all[id] = true
	}

	if st := run(0, 0); st.Condemned != int64(len(ids)) || st.Reclaimed != 0 {
		t.Fatalf("first run: %d condemned, %d reclaimed; want the %d chunks of the removed versions condemned", st.Condemned, st.Reclaimed, len(ids))
	}
	expectChunks("after the first run", all)
	if st := run(1, 59); st.Condemned != 0 || st.Reclaimed != 0 {
		t.Fatalf("run 59 minutes later: %d condemned, %d reclaimed; want nothing done", st.Condemned, st.Reclaimed)
	}
	expectChunks("59 minutes after condemnation", all)

	// The readers read the removed version in full meanwhile.
	got, err := io.ReadAll(stream)
	if err != nil || !bytes.Equal(got, body("v1")) {
		t.Fatalf("stream of the removed version: %d bytes, %v", len(got), err)
	}
	p := make([]byte, len(body("v1")))
	if n, err := ra.ReadAt(f.ctx, p, 0); n != len(p) || !bytes.Equal(p, body("v1")) {
		t.Fatalf("reader of the removed version: %d bytes, %v", n, err)
	}

	// Another gateway shares the condemned chunks of s1 again.
	m, err := data.DecodeManifest(shared.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reader.PutManifest(f.ctx, "bkt", "again", m, shared.ETag, object.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.names[again.ID.String()] = "s1"

	st := run(0, 60)
	if st.Reclaimed != int64(len(chunksOf(t, removed))) || st.Pardoned != int64(len(chunksOf(t, shared))) {
		t.Fatalf("run a grace period after condemnation: %d reclaimed, %d pardoned; want v1's %d gone and s1's %d pardoned",
			st.Reclaimed, st.Pardoned, len(chunksOf(t, removed)), len(chunksOf(t, shared)))
	}
	want := map[data.ChunkID]bool{}
	for _, id := range chunksOf(t, shared) {
		want[id] = true
	}
	expectChunks("a grace period after condemnation", want)
	f.expectBody("bkt", "again", "", "s1")
	f.expectBody("bkt", "k", "", "v2")
	if left, err := f.meta.ListCondemned(f.ctx, nil, meta.MaxLedgerBatch); err != nil || len(left) != 0 {
		t.Fatalf("ledger after the run: %d records, %v; want none", len(left), err)
	}
	if st, found := f.fsck(false); st.Missing != 0 || len(found) != 0 {
		t.Fatalf("fsck: %q", found)
	}
}

// TestLedgerRecordOfAGoneChunk: a condemned chunk deleted some other way
// leaves a record that the first run past its due time drops.
func TestLedgerRecordOfAGoneChunk(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled)
	orphan := data.NewChunkID()
	if err := f.data.Put(f.ctx, orphan, []byte("nobody's")); err != nil {
		t.Fatal(err)
	}
	f.backdate(2 * time.Hour)
	if st := f.collect(gc.Options{}); st.Condemned != 1 {
		t.Fatalf("%d condemned, want the orphan", st.Condemned)
	}
	if err := f.data.Delete(f.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	f.at(0, 0, 30)
	f.collect(gc.Options{})
	if left, err := f.meta.ListCondemned(f.ctx, nil, 10); err != nil || len(left) != 1 {
		t.Fatalf("ledger before the due time: %d records, %v; want the orphan's", len(left), err)
	}
	f.at(0, 1)
	if st := f.collect(gc.Options{}); st.Reclaimed != 0 {
		t.Fatalf("%d reclaimed of a chunk already gone", st.Reclaimed)
	}
	if left, err := f.meta.ListCondemned(f.ctx, nil, 10); err != nil || len(left) != 0 {
		t.Fatalf("ledger after the due time: %d records, %v; want none", len(left), err)
	}
}
