package gc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// Times in these tests follow S3's arithmetic: an action N days after an
// instant is due at the first midnight UTC after instant + N days. day0
// is at 10:30 UTC, so at(d, 13, 30) is midnight ending day d.

func TestNoncurrentDays(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "nc", Enabled: true, NoncurrentDays: 1})
	f.at(0)
	f.put("bkt", "k", "v1")
	f.at(1)
	f.put("bkt", "k", "v2")
	f.at(2)
	v3 := f.put("bkt", "k", "v3")
	o1 := f.put("bkt", "other", "o1")

	// v1 became noncurrent when v2 was written, on day 1 at 10:30: one
	// day later, at the next midnight, it is due.
	f.at(2, 13, 29)
	f.collect(gc.Options{})
	f.expectRows("bkt", "k=v3 k=v2 k=v1 other=o1")
	f.at(2, 13, 30)
	if st := f.collect(gc.Options{}); st.NoncurrentExpired != 1 || st.Rows != 4 {
		t.Fatalf("stats %+v", st)
	}
	f.expectRows("bkt", "k=v3 k=v2 other=o1")
	f.at(3, 13, 30)
	f.collect(gc.Options{})
	f.expectRows("bkt", "k=v3 other=o1")

	// Their chunks go once they are older than the grace period, and
	// condemned for as long.
	f.backdate(2 * time.Hour)
	st := f.reclaim(gc.Options{})
	want := append(chunksOf(t, v3), chunksOf(t, o1)...)
	if got := f.chunks(); len(got) != len(want) || st.Reclaimed != st.Unreferenced || st.Reclaimed == 0 {
		t.Fatalf("%d chunks left (%s), want the %d of v3 and o1", len(got), f.stats(st), len(want))
	}
	for _, id := range want {
		if !f.chunks()[id] {
			t.Fatalf("chunk %s of a live version was collected", id)
		}
	}
	f.expectBody("bkt", "k", "", "v3")
	f.expectBody("bkt", "other", "", "o1")
}

func TestNewerNoncurrentVersions(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "keep2", Enabled: true, NoncurrentDays: 1, NewerNoncurrentVersions: 2})
	for i := range 5 {
		f.at(i)
		f.put("bkt", "k", "v"+string(rune('1'+i)))
	}
	f.at(10)
	if st := f.collect(gc.Options{}); st.NoncurrentExpired != 2 {
		t.Fatalf("stats %+v", st)
	}
	f.expectRows("bkt", "k=v5 k=v4 k=v3")
	for _, v := range []string{"v5", "v4", "v3"} {
		f.expectBody("bkt", "k", f.id(v), v)
	}
}

func TestExpirationDays(t *testing.T) {
	f := newFixture(t)
	rule := meta.LifecycleRule{ID: "exp", Enabled: true, ExpirationDays: 2}
	f.bucket("ena", meta.Enabled, rule)
	f.bucket("sus", meta.Suspended, rule)
	f.bucket("unv", meta.Unversioned, rule)
	f.at(0)
	for _, b := range []string{"ena", "sus", "unv"} {
		f.put(b, "k", b+"1")
	}

	f.at(2, 13, 29)
	f.collect(gc.Options{})
	f.expectRows("ena", "k=ena1")
	f.expectRows("unv", "k=unv1")
	f.at(2, 13, 30)
	if st := f.collect(gc.Options{}); st.CurrentExpired != 3 {
		t.Fatalf("stats %+v", st)
	}
	// Versioned: a delete marker hides the version. Suspended: a null
	// marker replaces the null version. Unversioned: the object goes.
	f.expectRows("ena", "k=marker k=ena1")
	f.expectRows("sus", "k=marker")
	f.expectRows("unv", "")
	f.expectBody("ena", "k", f.id("ena1"), "ena1")

	// The suspended bucket's marker is now its key's only row: it goes
	// once it is two days old (it was written at midnight ending day 2).
	// The versioned one has a version below it and stays.
	f.at(5, 13, 29)
	f.collect(gc.Options{})
	f.expectRows("sus", "k=marker")
	f.at(5, 13, 30)
	if st := f.collect(gc.Options{}); st.MarkersRemoved != 1 || st.CurrentExpired != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.expectRows("sus", "")
	f.expectRows("ena", "k=marker k=ena1")
}

func TestExpiredObjectDeleteMarker(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "dm", Enabled: true, ExpiredObjectDeleteMarker: true})
	f.at(0)
	f.put("bkt", "a", "a1")
	f.del("bkt", "a", "am")
	f.del("bkt", "b", "bm") // a marker for a key that never existed
	c1 := f.put("bkt", "c", "c1")
	f.del("bkt", "c", "cm")
	if _, err := f.svc.Delete(f.ctx, "bkt", "c", object.DeleteOptions{VersionID: c1.WireID()}); err != nil {
		t.Fatal(err)
	}
	f.expectRows("bkt", "a=am a=a1 b=bm c=cm")

	if st := f.collect(gc.Options{}); st.MarkersRemoved != 2 {
		t.Fatalf("stats %+v", st)
	}
	f.expectRows("bkt", "a=am a=a1")

	// With noncurrent expiry too, a key's last version and its marker go
	// in the same run.
	if _, err := f.svc.SetLifecycle(f.ctx, "bkt", []meta.LifecycleRule{
		{ID: "all", Enabled: true, NoncurrentDays: 1, ExpiredObjectDeleteMarker: true},
	}); err != nil {
		t.Fatal(err)
	}
	f.at(1, 13, 30)
	if st := f.collect(gc.Options{}); st.NoncurrentExpired != 1 || st.MarkersRemoved != 1 {
		t.Fatalf("stats %+v", st)
	}
	f.expectRows("bkt", "")
}

func TestPrefixAndDisabledRules(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled,
		meta.LifecycleRule{ID: "logs", Prefix: "logs/", Enabled: true, ExpirationDays: 1},
		meta.LifecycleRule{ID: "off", Enabled: false, NoncurrentDays: 1})
	f.at(0)
	f.put("bkt", "logs/1", "l1")
	f.put("bkt", "data/1", "d1")
	f.put("bkt", "data/1", "d2")
	f.at(30)
	f.collect(gc.Options{})
	f.expectRows("bkt", "data/1=d2 data/1=d1 logs/1=marker logs/1=l1")
}

func TestBucketOption(t *testing.T) {
	f := newFixture(t)
	rule := meta.LifecycleRule{ID: "exp", Enabled: true, ExpirationDays: 1}
	f.bucket("one", meta.Unversioned, rule)
	f.bucket("two", meta.Unversioned, rule)
	f.at(0)
	f.put("one", "k", "one1")
	f.put("two", "k", "two1")
	f.at(10)
	f.collect(gc.Options{Bucket: "two"})
	f.expectRows("one", "k=one1")
	f.expectRows("two", "")
	if _, err := gc.Run(f.ctx, f.svc, gc.Options{Bucket: "nope", Logger: quiet}); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("gc of a missing bucket: %v", err)
	}
}

func TestAbortIncompleteUploads(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "mpu", Enabled: true, AbortIncompleteUploadDays: 1})
	f.at(0)
	src := f.put("bkt", "src", "s1")
	stale := f.upload("bkt", "big")
	p1 := f.part(stale, 1, "p1")
	if _, _, err := f.svc.CopyPart(f.ctx, "bkt", "big", stale.ID, 2, object.CopySource{Bucket: "bkt", Key: "src", Length: -1}); err != nil {
		t.Fatal(err)
	}
	done := f.upload("bkt", "done")
	dp := f.part(done, 1, "d1")
	if _, err := f.svc.CompleteUpload(f.ctx, "bkt", "done", done.ID, []object.CompletedPart{{Number: 1, ETag: dp.ETag}}, nil); err != nil {
		t.Fatal(err)
	}
	f.at(1, 12)
	young := f.upload("bkt", "big2")
	p2 := f.part(young, 1, "p2")

	// The stale upload was initiated on day 0 at 10:30: due at midnight
	// ending day 1. The completed one's record is a day old by then.
	f.at(1, 13, 30)
	if st := f.collect(gc.Options{}); st.UploadsAborted != 1 || st.UploadsDropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	us, err := f.meta.ListUploads(f.ctx, f.b("bkt"), meta.UploadListOptions{Completed: true})
	if err != nil || len(us) != 1 || us[0].ID != young.ID {
		t.Fatalf("uploads left: %v, %v; want only %s", us, err, young.ID)
	}

	// Once old, the aborted part's chunks go; the copied part's are the
	// source's and stay, as do the young upload's.
	f.backdate(2 * time.Hour)
	f.reclaim(gc.Options{})
	left := f.chunks()
	for _, id := range partChunks(t, p1) {
		if left[id] {
			t.Fatalf("chunk %s of an aborted part survived", id)
		}
	}
	for _, id := range append(chunksOf(t, src), partChunks(t, p2)...) {
		if !left[id] {
			t.Fatalf("chunk %s of a live version or upload was collected", id)
		}
	}
	f.expectBody("bkt", "src", "", "s1")
	v, err := f.svc.CompleteUpload(f.ctx, "bkt", "big2", young.ID, []object.CompletedPart{{Number: 1, ETag: p2.ETag}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.expectBody("bkt", "big2", v.WireID(), "p2")
}

func TestGraceKeepsYoungChunks(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Unversioned)
	f.put("bkt", "k", "k1")
	orphan := data.NewChunkID()
	if err := f.data.Put(f.ctx, orphan, []byte("written, its row not yet committed")); err != nil {
		t.Fatal(err)
	}
	st := f.collect(gc.Options{})
	if st.Unreferenced != 1 || st.Reclaimed != 0 || !f.chunks()[orphan] {
		t.Fatalf("a fresh chunk was taken: %+v", st)
	}
	f.backdateChunk(orphan, 59*time.Minute)
	if f.collect(gc.Options{}); !f.chunks()[orphan] {
		t.Fatal("a chunk younger than the grace period was taken")
	}
	if f.reclaim(gc.Options{Grace: 58 * time.Minute}); f.chunks()[orphan] {
		t.Fatal("a chunk older than a shorter grace period was kept")
	}
	f.expectBody("bkt", "k", "", "k1")
}

func TestDryRun(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "all", Enabled: true, NoncurrentDays: 1, ExpiredObjectDeleteMarker: true})
	f.at(0)
	f.put("bkt", "k", "k1")
	f.del("bkt", "k", "km")
	f.put("bkt", "j", "j1")
	f.put("bkt", "j", "j2")
	f.backdate(2 * time.Hour)
	f.at(5)
	before, chunks := f.rows("bkt"), len(f.chunks())
	dry := f.collect(gc.Options{DryRun: true})
	if f.rows("bkt") != before || len(f.chunks()) != chunks {
		t.Fatal("a dry run changed the bucket")
	}
	wet := f.collect(gc.Options{})
	if f.stats(dry) != f.stats(wet) || wet.NoncurrentExpired != 2 || wet.MarkersRemoved != 1 || wet.Condemned == 0 {
		t.Fatalf("dry run: %s\n  real run: %s", f.stats(dry), f.stats(wet))
	}
	f.expectRows("bkt", "j=j2")
	// A grace period later the condemned chunks go: the dry run says so.
	f.at(5, 1)
	chunks = len(f.chunks())
	dry = f.collect(gc.Options{DryRun: true})
	if len(f.chunks()) != chunks {
		t.Fatal("a dry run deleted chunks")
	}
	wet = f.collect(gc.Options{})
	if f.stats(dry) != f.stats(wet) || wet.Reclaimed != wet.Unreferenced || wet.Reclaimed == 0 || wet.Condemned != 0 {
		t.Fatalf("dry run: %s\n  real run: %s", f.stats(dry), f.stats(wet))
	}
}

func TestLease(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Unversioned)
	if _, err := f.meta.AcquireLease(f.ctx, gc.LeaseName, "elsewhere", f.clock.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(f.ctx, f.svc, gc.Options{Logger: quiet}); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("gc while another collector holds the lease: %v", err)
	}
	f.collect(gc.Options{DryRun: true}) // changes nothing: needs no lease
	if err := f.meta.ReleaseLease(f.ctx, gc.LeaseName, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	f.collect(gc.Options{Holder: "me"})
	// The run gave the lease back.
	if _, err := f.meta.AcquireLease(f.ctx, gc.LeaseName, "next", f.clock.Now(), time.Hour); err != nil {
		t.Fatalf("lease after a run: %v", err)
	}
}

func TestWorker(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Unversioned)
	ctx, cancel := context.WithCancel(f.ctx)
	runs := make(chan error, 10)
	w := gc.Worker{Interval: time.Millisecond, Options: gc.Options{Logger: quiet}, Done: func(_ *gc.Stats, err error) {
		if len(runs) < cap(runs) {
			runs <- err
		}
	}}
	errc := make(chan error)
	go func() { errc <- w.Run(ctx, f.svc) }()
	for range 3 {
		if err := <-runs; err != nil {
			t.Fatalf("worker run: %v", err)
		}
	}
	if _, err := f.meta.AcquireLease(f.ctx, gc.LeaseName, "elsewhere", f.clock.Now().Add(time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	for err := range runs {
		if errors.Is(err, meta.ErrLeaseHeld) {
			break
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("worker ended with %v", err)
	}
}

// TestUnreadableManifest checks that a row whose chunks cannot be known
// stops the sweep: they could be any chunk.
func TestUnreadableManifest(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled)
	bad := &meta.Version{Key: "bad", ID: meta.NewVersionID(f.clock.Now()), Size: 3, Manifest: []byte{0xff, 0xff}}
	if err := f.meta.Commit(f.ctx, f.b("bkt"), meta.PutMutation(f.b("bkt"), bad)); err != nil {
		t.Fatal(err)
	}
	orphan := data.NewChunkID()
	if err := f.data.Put(f.ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	f.backdate(2 * time.Hour)
	st, err := gc.Run(f.ctx, f.svc, gc.Options{Logger: quiet})
	if !errors.Is(err, meta.ErrCorrupt) || st.Unreadable != 1 || !f.chunks()[orphan] {
		t.Fatalf("gc over an unreadable manifest: %+v, %v", st, err)
	}
}

// b returns the bucket record.
func (f *fixture) b(name string) meta.Bucket {
	f.t.Helper()
	b, err := f.svc.Bucket(f.ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// id returns the wire id of the version the test named name.
func (f *fixture) id(name string) string {
	for id, n := range f.names {
		if n == name {
			return id
		}
	}
	f.t.Fatalf("no version named %s", name)
	return ""
}

func (f *fixture) upload(bucket, key string) *meta.Upload {
	f.t.Helper()
	u, err := f.svc.CreateUpload(f.ctx, bucket, key, object.UploadOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

func (f *fixture) part(u *meta.Upload, n int32, name string) *meta.Part {
	f.t.Helper()
	p, err := f.svc.UploadPart(f.ctx, "bkt", u.Key, u.ID, n, bytes.NewReader(body(name)), object.PartOptions{Size: -1})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func partChunks(t *testing.T, p *meta.Part) []data.ChunkID {
	t.Helper()
	return chunksOf(t, &meta.Version{Manifest: p.Manifest})
}

// backdateChunk makes one chunk look written d ago.
func (f *fixture) backdateChunk(id data.ChunkID, d time.Duration) {
	f.t.Helper()
	h := id.String()
	old := time.Now().Add(-d)
	if err := os.Chtimes(filepath.Join(f.dir, "chunks", h[:2], h), old, old); err != nil {
		f.t.Fatal(err)
	}
}
