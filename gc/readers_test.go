package gc_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestReaderKeepsRemovedVersion: a version removed (DELETE by version id)
// while a stream (S3 GET) and a random-access reader (a mount's handle)
// have it open keeps its chunks through collections until both close.
func TestReaderKeepsRemovedVersion(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled)
	v := f.put("bkt", "k", "v1")
	f.put("bkt", "k", "v2")
	stream, _, err := f.svc.Open(f.ctx, v, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := f.svc.ReaderAt(f.ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{VersionID: v.WireID()}); err != nil {
		t.Fatal(err)
	}
	f.backdate(2 * time.Hour)
	for i := range 3 {
		f.at(0, 2*i+1) // runs hours apart: past any grace period
		if st := f.collect(gc.Options{}); st.Unreferenced == 0 {
			t.Fatalf("run %d: the removed version's chunks were not found unreferenced", i)
		}
	}
	got, err := io.ReadAll(stream)
	if err != nil || !bytes.Equal(got, body("v1")) {
		t.Fatalf("stream of the removed version: %d bytes, %v", len(got), err)
	}
	stream.Close()
	p := make([]byte, len(body("v1")))
	if n, err := ra.ReadAt(f.ctx, p, 0); n != len(p) || !bytes.Equal(p, body("v1")) {
		t.Fatalf("reader of the removed version: %d bytes, %v", n, err)
	}
	ids := chunksOf(t, v)
	for _, id := range ids {
		if !f.svc.Reading(id) {
			t.Fatalf("chunk %s not held while a reader is open", id)
		}
	}
	ra.Close()
	ra.Close() // a second Close must not release another reader's hold
	for _, id := range ids {
		if f.svc.Reading(id) {
			t.Fatalf("chunk %s still held after every reader closed", id)
		}
	}
	for i := range 2 {
		f.at(0, 8+2*i)
		f.collect(gc.Options{})
	}
	left := f.chunks()
	for _, id := range ids {
		if left[id] {
			t.Fatalf("chunk %s of the removed version outlived its readers", id)
		}
	}
	f.expectBody("bkt", "k", "", "v2")
}
