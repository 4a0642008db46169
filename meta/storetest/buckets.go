package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// sameBucket reports whether two bucket records are equal in every field.
func sameBucket(a, b meta.Bucket) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Created.Equal(b.Created) &&
		a.Versioning == b.Versioning && a.Owner == b.Owner && a.Shards == b.Shards &&
		slices.Equal(a.Lifecycle, b.Lifecycle)
}

// expectBuckets checks Buckets and Bucket of each name against want,
// which is ordered by name.
func (e *env) expectBuckets(want ...meta.Bucket) {
	e.t.Helper()
	got, err := e.s.Buckets(e.ctx)
	if err != nil {
		e.t.Fatalf("Buckets: %v", err)
	}
	if len(got) != len(want) {
		e.t.Fatalf("Buckets = %+v, want %+v", got, want)
	}
	for i := range got {
		if !sameBucket(got[i], want[i]) {
			e.t.Fatalf("Buckets = %+v, want %+v", got, want)
		}
		b, err := e.s.Bucket(e.ctx, want[i].Name)
		if err != nil || !sameBucket(b, want[i]) {
			e.t.Fatalf("Bucket(%q) = %+v, %v; want %+v", want[i].Name, b, err, want[i])
		}
	}
}

// expectNoBucket checks that the named bucket is gone for every call.
func (e *env) expectNoBucket(name string) {
	e.t.Helper()
	if _, err := e.s.Bucket(e.ctx, name); !errors.Is(err, meta.ErrNoSuchBucket) {
		e.t.Fatalf("Bucket(%q): %v, want ErrNoSuchBucket", name, err)
	}
	if err := e.s.DeleteBucket(e.ctx, name); !errors.Is(err, meta.ErrNoSuchBucket) {
		e.t.Fatalf("DeleteBucket(%q): %v, want ErrNoSuchBucket", name, err)
	}
	set := func(b *meta.Bucket) error { b.Versioning = meta.Enabled; return nil }
	if _, err := e.s.UpdateBucket(e.ctx, name, set); !errors.Is(err, meta.ErrNoSuchBucket) {
		e.t.Fatalf("UpdateBucket(%q): %v, want ErrNoSuchBucket", name, err)
	}
}

func testBucketsCreate(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	c := e.createBucket("charlie", meta.Enabled)
	a := e.createBucket("alpha", meta.Suspended)
	a2 := e.createBucket("alpha-2", meta.Unversioned)
	e.expectBuckets(a, a2, c, e.b)

	dup, err := meta.NewBucket("charlie", "someone", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.CreateBucket(e.ctx, dup); !errors.Is(err, meta.ErrBucketExists) {
		t.Fatalf("CreateBucket of an existing name: %v, want ErrBucketExists", err)
	}
	e.expectBuckets(a, a2, c, e.b)
	e.expectNoBucket("missing")
}

func testBucketsCreateRace(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	const n = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []meta.Bucket
		others []error
	)
	for range n {
		b, err := meta.NewBucket("contested", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			err := e.s.CreateBucket(e.ctx, b)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, b)
			} else {
				others = append(others, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent CreateBucket calls won, want 1", len(won), n)
	}
	for _, err := range others {
		if !errors.Is(err, meta.ErrBucketExists) {
			t.Fatalf("a losing CreateBucket: %v, want ErrBucketExists", err)
		}
	}
	e.expectBuckets(won[0], e.b)
}

func testBucketsDeleteNotEmpty(t *testing.T, open Opener) {
	for _, c := range []struct {
		name  string
		state meta.Versioning
		fill  func(e *env)
	}{
		{"live version", meta.Enabled, func(e *env) { e.put("k") }},
		{"null version", meta.Unversioned, func(e *env) { e.put("k") }},
		{"only a delete marker", meta.Enabled, func(e *env) { e.del("k") }},
		{"only a null delete marker", meta.Suspended, func(e *env) { e.del("k") }},
		{"noncurrent version under a marker", meta.Enabled, func(e *env) { e.put("k"); e.del("k") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, open, c.state)
			c.fill(e)
			if err := e.s.DeleteBucket(e.ctx, e.b.Name); !errors.Is(err, meta.ErrBucketNotEmpty) {
				t.Fatalf("DeleteBucket: %v, want ErrBucketNotEmpty", err)
			}
			e.expectBuckets(e.b)
			e.expectState()
		})
	}
}

func testBucketsDelete(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	keep := e.createBucket("keep", meta.Enabled)
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatalf("DeleteBucket of an empty bucket: %v", err)
	}
	e.expectNoBucket(e.b.Name)
	e.expectBuckets(keep)

	// A bucket whose every row was removed is empty again.
	e.b = e.createBucket("emptied", meta.Enabled)
	v := e.put("k")
	m := e.del("k")
	e.delVersion("k", m.ID)
	e.delVersion("k", v.ID)
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatalf("DeleteBucket after removing every row: %v", err)
	}
	e.expectNoBucket(e.b.Name)
	e.expectBuckets(keep)
}

func testBucketsUpdate(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	other := e.createBucket("other", meta.Unversioned)
	for _, v := range []meta.Versioning{meta.Enabled, meta.Suspended, meta.Enabled} {
		e.setVersioning(v)
		e.expectBuckets(other, e.b)
	}
	refuse := errors.New("refused")
	_, err := e.s.UpdateBucket(e.ctx, e.b.Name, func(b *meta.Bucket) error {
		b.Versioning = meta.Suspended
		return refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("UpdateBucket with a failing fn: %v, want %v", err, refuse)
	}
	e.expectBuckets(other, e.b)
}

func testBucketsRecreate(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	old := e.b
	for _, key := range []string{"a", "b/c"} {
		v := e.put(key)
		e.delVersion(key, v.ID)
	}
	if err := e.s.DeleteBucket(e.ctx, old.Name); err != nil {
		t.Fatalf("DeleteBucket: %v", err)
	}
	e.b = e.createBucket(old.Name, meta.Unversioned)
	if e.b.ID == old.ID {
		t.Fatal("NewBucket reused a bucket id")
	}
	e.expectBuckets(e.b)
	e.expectState()
	e.put("a")
	e.expectState()
}

func testBucketsIsolation(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	keys := []string{"a", "b/c", "d"}
	for _, k := range keys {
		e.put(k)
	}
	first, firstModel := e.b, e.m

	e.b, e.m = e.createBucket("storetest-2", meta.Enabled), &model{}
	for _, k := range keys[1:] {
		e.put(k)
		e.del(k)
	}
	e.expectState()
	second, secondModel := e.b, e.m
	e.b, e.m = first, firstModel
	e.expectState()

	// Emptying and deleting the second bucket leaves the first alone.
	e.b, e.m = second, secondModel
	for len(e.m.rows) > 0 {
		e.delVersion(e.m.rows[0].Key, e.m.rows[0].ID)
	}
	if err := e.s.DeleteBucket(e.ctx, second.Name); err != nil {
		t.Fatalf("DeleteBucket(%q): %v", second.Name, err)
	}
	e.b, e.m = first, firstModel
	e.expectBuckets(first)
	e.expectState()
}
