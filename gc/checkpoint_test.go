package gc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// resumeKeys is the number of keys of the middle bucket: two versions
// each make more than a page of rows (meta.MaxListKeys), so a run can be
// cut short in the middle of the bucket.
const resumeKeys = 600

// fillResume writes buckets aaa, bbb and ccc, each keeping noncurrent
// versions a day: aaa and ccc five keys of three-chunk bodies, bbb
// resumeKeys keys of small bodies stored in their rows; every key has two
// versions. It then moves the clock on two days, when every noncurrent
// version is due.
func fillResume(f *fixture) {
	f.t.Helper()
	rule := meta.LifecycleRule{ID: "nc", Enabled: true, NoncurrentDays: 1}
	f.at(0)
	for _, b := range []string{"aaa", "bbb", "ccc"} {
		f.bucket(b, meta.Enabled, rule)
	}
	for v := range 2 {
		for _, b := range []string{"aaa", "ccc"} {
			for k := range 5 {
				f.put(b, fmt.Sprint("k", k), fmt.Sprintf("%s.k%d.v%d", b, k, v))
			}
		}
		for k := range resumeKeys {
			key, name := fmt.Sprintf("k%04d", k), fmt.Sprintf("v%d", v)
			if _, err := f.svc.Put(f.ctx, "bbb", key, strings.NewReader(name), object.PutOptions{Size: int64(len(name))}); err != nil {
				f.t.Fatalf("put bbb/%s: %v", key, err)
			}
		}
	}
	f.at(2)
}

// checkpoint returns the collector's checkpoint, or nil when there is none.
func (f *fixture) checkpoint() *meta.Checkpoint {
	f.t.Helper()
	c, err := f.meta.Checkpoint(f.ctx, gc.LeaseName)
	if errors.Is(err, meta.ErrNoSuchCheckpoint) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return &c
}

func (f *fixture) bucketID(name string) uint64 {
	f.t.Helper()
	b, err := f.svc.Bucket(f.ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return b.ID
}

// TestResume: a run cut short in the middle of a bucket leaves a
// checkpoint at the last key it finished; the next run, of another
// holder, starts right after it, wraps around to the buckets and keys
// before it, saves its own checkpoints as it goes and removes the
// checkpoint when its walk got round. The two runs leave what one whole
// run leaves.
func TestResume(t *testing.T) {
	onEachStore(t, testResume)
}

func testResume(t *testing.T, store ...func(meta.Store) meta.Store) {
	f := newFixture(t, store...)
	fillResume(f)

	// The first run saves no checkpoint on its way (not due for an hour):
	// only as it stops, after bbb's first page, the last key of which
	// (k0499) may have more rows on the next.
	gc.SetCheckpointEvery(t, time.Hour)
	ctx, cancel := context.WithCancel(f.ctx)
	first, err := gc.Run(ctx, f.svc, gc.Options{Logger: quiet, Progress: func(p gc.Progress) {
		if p.Phase == "scan" && p.Bucket == "bbb" {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a run canceled during its scan: %v", err)
	}
	bid := f.bucketID("bbb")
	if c := f.checkpoint(); c == nil || c.Bucket != bid || c.Key != "k0498" {
		t.Fatalf("checkpoint after a run cut short in bbb at k0499: %+v, want bbb (%d) k0498", c, bid)
	}
	// k0499's rows were judged with its page: walked again, it has
	// nothing left to expire.
	if first.NoncurrentExpired != 5+500 {
		t.Fatalf("the first run expired %d noncurrent versions, want 505 (aaa's 5, bbb's first 500)", first.NoncurrentExpired)
	}

	// The second saves one after every page: at the end of bbb, before it
	// goes on to ccc.
	gc.SetCheckpointEvery(t, 0)
	var walk []string
	var atFirst gc.Progress
	var saved *meta.Checkpoint
	f.at(2, 1)
	second, err := gc.Run(f.ctx, f.svc, gc.Options{Logger: quiet, Progress: func(p gc.Progress) {
		if p.Phase != "scan" {
			return
		}
		if len(walk) == 0 {
			atFirst, saved = p, f.checkpoint()
		}
		if len(walk) == 0 || walk[len(walk)-1] != p.Bucket {
			walk = append(walk, p.Bucket)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(walk); got != "[bbb ccc aaa bbb]" {
		t.Fatalf("the resumed run walked %s, want [bbb ccc aaa bbb]", got)
	}
	// Its first rows: k0499's one left, then two of each key after it.
	if want := 1 + 2*(resumeKeys-500); atFirst.Rows != int64(want) || atFirst.ResumedBucket != "bbb" || atFirst.ResumedKey != "k0498" {
		t.Fatalf("the resumed run's first progress: %d rows read, resumed at %q %q; want %d rows, after bbb k0498",
			atFirst.Rows, atFirst.ResumedBucket, atFirst.ResumedKey, want)
	}
	if saved == nil || saved.Bucket != bid || saved.Key != fmt.Sprintf("k%04d", resumeKeys-1) {
		t.Fatalf("checkpoint at the end of bbb's last keys: %+v, want bbb k%04d", saved, resumeKeys-1)
	}
	if c := f.checkpoint(); c != nil {
		t.Fatalf("a run that went round left the checkpoint %+v", c)
	}
	// It read every row once: aaa's and bbb's first 500 keys' one, bbb's
	// last keys' two, ccc's ten.
	if want := 5 + 500 + 2*(resumeKeys-500) + 10; second.Rows != int64(want) {
		t.Fatalf("the resumed run read %d rows, want %d", second.Rows, want)
	}
	if second.Buckets != 3 || second.NoncurrentExpired != resumeKeys-500+5 {
		t.Fatalf("the resumed run: %d buckets, %d noncurrent expired; want 3 and %d", second.Buckets, second.NoncurrentExpired, resumeKeys-500+5)
	}

	// What one uninterrupted run leaves, on mem.
	whole := newFixture(t)
	fillResume(whole)
	if st := whole.collect(gc.Options{}); st.NoncurrentExpired != first.NoncurrentExpired+second.NoncurrentExpired {
		t.Fatalf("one whole run expired %d, the two runs %d and %d", st.NoncurrentExpired, first.NoncurrentExpired, second.NoncurrentExpired)
	}
	for _, b := range []string{"aaa", "bbb", "ccc"} {
		if got, want := f.rows(b), whole.rows(b); got != want {
			t.Fatalf("rows of %s after a run resumed:\n got %s\nwant %s", b, got, want)
		}
	}
	// And so does the sweep: the expired versions' chunks go, once.
	f.backdate(2 * time.Hour)
	whole.backdate(2 * time.Hour)
	before := len(whole.chunks())
	f.reclaim(gc.Options{})
	whole.reclaim(gc.Options{})
	if got, want := len(f.chunks()), len(whole.chunks()); got != want || want != before/2 {
		t.Fatalf("%d chunks left after a run resumed, %d after one whole run, of %d; want half", got, want, before)
	}
}

// TestResumeIgnoresGoneBucket: a checkpoint whose bucket was deleted, or
// deleted and created again under its name (another id), is ignored: the
// run starts at the first bucket, walks them all and removes it.
func TestResumeIgnoresGoneBucket(t *testing.T) {
	onEachStore(t, testResumeIgnoresGoneBucket)
}

func testResumeIgnoresGoneBucket(t *testing.T, store ...func(meta.Store) meta.Store) {
	f := newFixture(t, store...)
	for _, b := range []string{"aaa", "gone", "zzz"} {
		f.bucket(b, meta.Unversioned)
	}
	f.put("aaa", "k", "a")
	deleted := f.bucketID("gone")
	if err := f.svc.DeleteBucket(f.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	recreated := f.bucketID("zzz")
	if err := f.svc.DeleteBucket(f.ctx, "zzz"); err != nil {
		t.Fatal(err)
	}
	f.bucket("zzz", meta.Unversioned)
	f.put("zzz", "k", "z")

	for _, id := range []uint64{deleted, recreated} {
		c := meta.Checkpoint{Name: gc.LeaseName, Holder: "gone", Saved: f.clock.Now(), Bucket: id, Key: "k"}
		if err := f.meta.SaveCheckpoint(f.ctx, c); err != nil {
			t.Fatal(err)
		}
		var walk []string
		st := f.collect(gc.Options{Progress: func(p gc.Progress) {
			if p.Phase == "scan" {
				walk = append(walk, p.Bucket)
			}
		}})
		if got := fmt.Sprint(walk); got != "[aaa zzz]" || st.ResumedBucket != "" || st.Buckets != 2 {
			t.Fatalf("with a checkpoint of a bucket gone, the run walked %s, resumed at %q, counted %d buckets; want [aaa zzz] from the start",
				got, st.ResumedBucket, st.Buckets)
		}
		if c := f.checkpoint(); c != nil {
			t.Fatalf("a run that went round left the checkpoint %+v", c)
		}
	}
}
