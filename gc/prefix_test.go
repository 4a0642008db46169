package gc_test

import (
	"testing"
	"time"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestEveryRuleKindUnderAPrefix runs each kind of lifecycle rule, filtered
// to the prefix p/, over the same history written under p/ and q/: the
// collector expires under p/ exactly what S3 would, when S3 would, and
// nothing under q/.
func TestEveryRuleKindUnderAPrefix(t *testing.T) {
	twoVersions := func(f *fixture, key string) {
		f.at(0)
		f.put("bkt", key, "v1")
		f.at(1)
		f.put("bkt", key, "v2")
	}
	for _, c := range []struct {
		name    string
		rule    meta.LifecycleRule
		history func(f *fixture, key string)
		// before is an instant at which nothing is due yet (nil: the rule
		// has no time), due one at which the rule has acted under p/.
		before, due []int
		want        string
	}{
		{
			// v1 became noncurrent on day 1 at 10:30: due at the midnight
			// ending day 2.
			name: "NoncurrentDays", rule: meta.LifecycleRule{NoncurrentDays: 1},
			history: twoVersions, before: []int{2, 13, 29}, due: []int{2, 13, 30},
			want: "p/k=v2 q/k=v2 q/k=v1",
		},
		{
			name: "NewerNoncurrentVersions", rule: meta.LifecycleRule{NoncurrentDays: 1, NewerNoncurrentVersions: 1},
			history: func(f *fixture, key string) {
				twoVersions(f, key)
				f.at(2)
				f.put("bkt", key, "v3")
			},
			before: []int{2, 13, 29}, due: []int{10},
			want: "p/k=v3 p/k=v2 q/k=v3 q/k=v2 q/k=v1",
		},
		{
			// In a versioned bucket the current version gets a delete
			// marker on top and stays, noncurrent.
			name: "ExpirationDays", rule: meta.LifecycleRule{ExpirationDays: 2},
			history: twoVersions, before: []int{3, 13, 29}, due: []int{3, 13, 30},
			want: "p/k=marker p/k=v2 p/k=v1 q/k=v2 q/k=v1",
		},
		{
			name: "ExpiredObjectDeleteMarker", rule: meta.LifecycleRule{ExpiredObjectDeleteMarker: true},
			history: func(f *fixture, key string) {
				f.at(0)
				v := f.put("bkt", key, "v1")
				f.del("bkt", key, "m")
				if _, err := f.svc.Delete(f.ctx, "bkt", key, object.DeleteOptions{VersionID: v.WireID()}); err != nil {
					f.t.Fatal(err)
				}
			},
			due:  []int{0, 0, 1},
			want: "q/k=m",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			rule := c.rule
			rule.ID, rule.Prefix, rule.Enabled = "p", "p/", true
			f.bucket("bkt", meta.Enabled, rule)
			c.history(f, "p/k")
			c.history(f, "q/k")
			all := f.rows("bkt")
			if c.before != nil {
				f.at(c.before[0], c.before[1:]...)
				f.collect(gc.Options{})
				f.expectRows("bkt", all)
			}
			f.at(c.due[0], c.due[1:]...)
			f.collect(gc.Options{})
			f.expectRows("bkt", c.want)
		})
	}

	t.Run("AbortIncompleteMultipartUpload", func(t *testing.T) {
		f := newFixture(t)
		f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "p", Prefix: "p/", Enabled: true, AbortIncompleteUploadDays: 1})
		f.at(0)
		stale, kept := f.upload("bkt", "p/u"), f.upload("bkt", "q/u")
		sp, kp := f.part(stale, 1, "sp"), f.part(kept, 1, "kp")
		uploads := func() string {
			t.Helper()
			us, err := f.meta.ListUploads(f.ctx, f.b("bkt"), meta.UploadListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var keys string
			for _, u := range us {
				keys += u.Key + " "
			}
			return keys
		}
		f.at(1, 13, 29)
		if f.collect(gc.Options{}); uploads() != "p/u q/u " {
			t.Fatalf("uploads before due: %q", uploads())
		}
		f.at(1, 13, 30)
		if st := f.collect(gc.Options{}); st.UploadsAborted != 1 || uploads() != "q/u " {
			t.Fatalf("uploads when due: %q (%d aborted)", uploads(), st.UploadsAborted)
		}
		f.backdate(2 * time.Hour)
		f.reclaim(gc.Options{})
		left := f.chunks()
		for _, id := range partChunks(t, sp) {
			if left[id] {
				t.Fatalf("chunk %s of the aborted upload's part survived", id)
			}
		}
		for _, id := range partChunks(t, kp) {
			if !left[id] {
				t.Fatalf("chunk %s of the upload outside the prefix was collected", id)
			}
		}
	})
}
