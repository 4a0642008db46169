package storetest

import (
	"errors"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// setLifecycle replaces the bucket's rules and checks what comes back.
func (e *env) setLifecycle(rules []meta.LifecycleRule) {
	e.t.Helper()
	b, err := e.s.UpdateBucket(e.ctx, e.b.Name, func(b *meta.Bucket) error {
		b.Lifecycle = rules
		return nil
	})
	want := e.b
	want.Lifecycle = rules
	if err != nil || !sameBucket(b, want) {
		e.t.Fatalf("UpdateBucket(lifecycle %+v) = %+v, %v", rules, b, err)
	}
	e.b = b
}

func testBucketsLifecycle(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	other := e.createBucket("other", meta.Unversioned)
	rules := []meta.LifecycleRule{
		{ID: "old versions", Enabled: true, NoncurrentDays: 30, NewerNoncurrentVersions: 3, ExpiredObjectDeleteMarker: true, AbortIncompleteUploadDays: 7},
		{ID: "logs", Prefix: "logs/\x00ünï", ExpirationDays: 1 << 30},
		{ID: "off", Enabled: false, NoncurrentDays: 1},
	}
	e.setLifecycle(rules)
	e.expectBuckets(other, e.b)

	// Other changes of the record keep the rules.
	e.setVersioning(meta.Suspended)
	if len(e.b.Lifecycle) != len(rules) {
		t.Fatalf("rules after a versioning change: %+v", e.b.Lifecycle)
	}
	e.expectBuckets(other, e.b)

	// Rules the stored form cannot hold are refused and change nothing.
	for _, bad := range []meta.LifecycleRule{
		{ID: "negative", NoncurrentDays: -1},
		{ID: "prefix", Prefix: "\xff", NoncurrentDays: 1},
	} {
		_, err := e.s.UpdateBucket(e.ctx, e.b.Name, func(b *meta.Bucket) error {
			b.Lifecycle = append(b.Lifecycle, bad)
			return nil
		})
		if !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("UpdateBucket with rule %+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	e.expectBuckets(other, e.b)

	e.setLifecycle(nil)
	e.expectBuckets(other, e.b)

	// A bucket created again under the name starts without rules.
	e.setLifecycle(rules)
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatal(err)
	}
	e.b = e.createBucket(bucketName, meta.Enabled)
	e.expectBuckets(other, e.b)
}
