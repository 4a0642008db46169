package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// testOrphansNone: live buckets are never orphans, and DropOrphan refuses
// them, whatever they hold.
func testOrphansNone(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	e.put("a")
	e.del("a")
	u := e.createUpload("b")
	e.putPart(u, 1)
	empty := e.createBucket("empty", meta.Unversioned)
	orphans, err := e.s.OrphanBuckets(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orphans {
		if o.ID == e.b.ID || o.ID == empty.ID {
			t.Fatalf("OrphanBuckets names the live bucket %x", o.ID)
		}
	}
	if _, err := e.s.DropOrphan(e.ctx, e.b); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("DropOrphan of a live bucket: %v, want ErrInvalidArgument", err)
	}
	e.expectState()
}

// Orphans checks OrphanBuckets and DropOrphan on what a write racing
// DeleteBucket leaves: orphan must remove b's record from s and leave its
// rows and uploads, as a backend's own test can (the contract has no
// way to).
func Orphans(t *testing.T, open Opener, orphan func(t *testing.T, s meta.Store, b meta.Bucket)) {
	e := newEnv(t, open, meta.Enabled)
	live := e.put("live")
	dead := e.createBucket("dead", meta.Enabled)
	d := e.with(t)
	d.b, d.m = dead, &model{}
	for _, k := range []string{"a", "a", "b/c", "d"} {
		d.put(k)
	}
	d.del("d")
	u := d.createUpload("e")
	d.putPart(u, 1)
	d.putPart(u, 2)
	orphan(t, e.s, dead)

	find := func() *meta.Bucket {
		t.Helper()
		orphans, err := e.s.OrphanBuckets(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(orphans, func(o meta.Bucket) bool { return o.ID == dead.ID })
		if slices.ContainsFunc(orphans, func(o meta.Bucket) bool { return o.ID == e.b.ID }) {
			t.Fatalf("OrphanBuckets names the live bucket")
		}
		if i < 0 {
			return nil
		}
		return &orphans[i]
	}
	o := find()
	if o == nil {
		t.Fatalf("OrphanBuckets misses the rows of the deleted bucket %x", dead.ID)
	}
	removed := 0
	for {
		n, err := e.s.DropOrphan(e.ctx, *o)
		if err != nil {
			t.Fatalf("DropOrphan: %v", err)
		}
		if n == 0 {
			break
		}
		removed += n
	}
	if removed == 0 {
		t.Fatal("DropOrphan removed nothing")
	}
	if find() != nil {
		t.Fatalf("the orphan is still there after %d records were removed", removed)
	}
	it := e.s.Scan(e.ctx, dead, meta.ScanOptions{})
	defer it.Close()
	if it.Next() {
		t.Fatalf("the orphan's row %q is still there", it.Version().Key)
	}
	if v, err := e.s.Get(e.ctx, e.b, "live", live.ID); err != nil || v.ETag != live.ETag {
		t.Fatalf("the live bucket's row after the orphan went: %v, %v", v, err)
	}
}
