package object_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

func (f *fixture) head(key string) *meta.Version {
	f.t.Helper()
	v, err := f.svc.Head(f.ctx, "bkt", key, "")
	if err != nil {
		f.t.Fatalf("head %s: %v", key, err)
	}
	return v
}

// rows counts the rows of exactly key.
func (f *fixture) rows(key string) int {
	f.t.Helper()
	res, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{Prefix: key})
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, e := range res.Versions {
		if e.Key == key {
			n++
		}
	}
	return n
}

// preparePut prepares a put of key, returning the write and its version.
func (f *fixture) preparePut(key string, body []byte) (*object.Pending, *meta.Version) {
	f.t.Helper()
	var v *meta.Version
	p, err := f.svc.Prepare(f.ctx, func(d *object.Service) (err error) {
		v, err = d.Put(f.ctx, "bkt", key, bytes.NewReader(body), object.PutOptions{Size: int64(len(body))})
		return err
	})
	if err != nil {
		f.t.Fatalf("prepare put %s: %v", key, err)
	}
	return p, v
}

func TestPreparedWritesCommitTogether(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	var mu sync.Mutex
	var changed []string
	defer f.svc.Watch(func(c object.Change) {
		mu.Lock()
		changed = append(changed, c.Key)
		mu.Unlock()
	})()
	old := f.put("gone", []byte("x"))
	big := bytes.Repeat([]byte("chunked "), chunk/4)
	pa, va := f.preparePut("a", []byte("small"))
	pb, vb := f.preparePut("b", big)
	pd, err := f.svc.Prepare(f.ctx, func(d *object.Service) error {
		_, err := d.Delete(f.ctx, "bkt", "gone", object.DeleteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Concat(pa.Keys(), pb.Keys(), pd.Keys()); !slices.Equal(got, []string{"a", "b", "gone"}) {
		t.Errorf("keys %q", got)
	}

	// Prepared: chunks written, nothing visible, nobody told.
	for _, k := range []string{"a", "b"} {
		if _, err := f.svc.Head(f.ctx, "bkt", k, ""); !errors.Is(err, meta.ErrNoSuchKey) {
			t.Errorf("%s before the commit: %v", k, err)
		}
	}
	if v := f.head("gone"); v.ID != old.ID {
		t.Error("the delete is visible before the commit")
	}
	if f.chunks() == 0 {
		t.Error("no chunk written by the prepared put")
	}
	mu.Lock()
	if len(changed) != 1 { // the put of "gone"
		t.Errorf("watchers told of %q before the commit", changed)
	}
	mu.Unlock()

	if err := f.svc.CommitPending(f.ctx, pa, pb, pd); err != nil {
		t.Fatal(err)
	}
	if got := f.head("a"); got.ID != va.ID || !bytes.Equal(f.mustRead("a", ""), []byte("small")) {
		t.Error("a: not the prepared version")
	}
	if got := f.head("b"); got.ID != vb.ID || !bytes.Equal(f.mustRead("b", ""), big) {
		t.Error("b: not the prepared version")
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "gone", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("gone after the commit: %v", err)
	}
	mu.Lock()
	if !slices.Equal(changed, []string{"gone", "a", "b", "gone"}) {
		t.Errorf("watchers told of %q", changed)
	}
	mu.Unlock()
}

func TestPreparedVersionsKeepTheirOrder(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	first, _ := f.preparePut("k", []byte("first"))
	second, _ := f.preparePut("k", []byte("second"))
	// Committed in the other order, the later write still wins.
	for _, p := range []*object.Pending{second, first} {
		if err := f.svc.CommitPending(f.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.mustRead("k", ""); string(got) != "second" {
		t.Errorf("latest reads %q", got)
	}
}

func TestCommitPendingIsAllOrNothing(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	f.put("taken", []byte("x"))
	ok, _ := f.preparePut("free", []byte("y"))
	refused, err := f.svc.Prepare(f.ctx, func(d *object.Service) error {
		_, err := d.Put(f.ctx, "bkt", "taken", bytes.NewReader(nil), object.PutOptions{Check: func(head *meta.Version) error {
			if head != nil {
				return meta.ErrPreconditionFailed
			}
			return nil
		}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.CommitPending(f.ctx, ok, refused); !errors.Is(err, meta.ErrPreconditionFailed) {
		t.Fatalf("commit: %v", err)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "free", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("a write of a failed commit is visible: %v", err)
	}
	if err := f.svc.CommitPending(f.ctx, ok); err != nil {
		t.Fatalf("the other write alone: %v", err)
	}

	// Writes to two buckets cannot share a commit.
	if _, err := f.svc.CreateBucket(f.ctx, "other", ""); err != nil {
		t.Fatal(err)
	}
	elsewhere, err := f.svc.Prepare(f.ctx, func(d *object.Service) error {
		_, err := d.Put(f.ctx, "other", "k", bytes.NewReader(nil), object.PutOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.CommitPending(f.ctx, ok, elsewhere); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Errorf("commit across buckets: %v", err)
	}
}

func TestRenameVersionAndReplaceAttrsOfAPreparedVersion(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	put, v := f.preparePut("src", []byte("bytes"))
	mode := &meta.POSIX{Mode: 0o100600}
	var attrs, moved *meta.Version
	update, err := f.svc.Prepare(f.ctx, func(d *object.Service) (err error) {
		attrs, err = d.ReplaceAttrs(f.ctx, "bkt", v, object.Attrs{POSIX: mode, UserMeta: map[string]string{"k": "v"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rename, err := f.svc.Prepare(f.ctx, func(d *object.Service) (err error) {
		moved, err = d.RenameVersion(f.ctx, "bkt", attrs, "dst", "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rename.Keys(), []string{"dst", "src"}) {
		t.Errorf("rename keys %q", rename.Keys())
	}
	// Each depends on the one before: one commit each, in order.
	for _, p := range []*object.Pending{put, update, rename} {
		if err := f.svc.CommitPending(f.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got := f.head("dst")
	if got.ID != moved.ID || got.ETag != v.ETag || got.POSIX.Mode != mode.Mode || got.UserMeta["k"] != "v" {
		t.Errorf("dst: %+v", got)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "src", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("src after the rename: %v", err)
	}
	if n := f.rows("src"); n != 3 {
		t.Errorf("src has %d rows, want the put, the attributes and the marker", n)
	}

	// A version that is no longer the latest cannot be renamed or changed.
	stale := f.head("dst")
	f.put("dst", []byte("newer"))
	if _, err := f.svc.RenameVersion(f.ctx, "bkt", stale, "elsewhere", ""); !errors.Is(err, meta.ErrConflict) {
		t.Errorf("rename of a stale head: %v", err)
	}
	if _, err := f.svc.ReplaceAttrs(f.ctx, "bkt", stale, object.Attrs{}); !errors.Is(err, meta.ErrConflict) {
		t.Errorf("attributes of a stale head: %v", err)
	}
	if _, err := f.svc.RenameVersion(f.ctx, "bkt", stale, "dst", ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Errorf("rename onto itself: %v", err)
	}
}

func TestAmendAPreparedVersion(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	p, v := f.preparePut("k", []byte("bytes"))
	mode := &meta.POSIX{Mode: 0o100640}
	amended, err := p.Amend(object.Attrs{POSIX: mode, UserMeta: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if amended.ID != v.ID || v.POSIX != nil {
		t.Errorf("amended %s from %s; the first version changed: %+v", amended.ID, v.ID, v.POSIX)
	}
	if err := f.svc.CommitPending(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	got := f.head("k")
	if got.ID != v.ID || got.POSIX.Mode != mode.Mode || got.UserMeta["a"] != "b" || got.ETag != v.ETag {
		t.Errorf("committed %+v", got)
	}
	if n := f.rows("k"); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}

	// A delete writes no version to amend; a directory rename several.
	f.put("d/1", nil)
	f.put("d/2", nil)
	for name, write := range map[string]func(d *object.Service) error{
		"delete": func(d *object.Service) error {
			_, err := d.Delete(f.ctx, "bkt", "k", object.DeleteOptions{})
			return err
		},
		"rename of a prefix": func(d *object.Service) error {
			_, err := d.RenamePrefix(f.ctx, "bkt", "d/", "e/", "", 10)
			return err
		},
	} {
		p, err := f.svc.Prepare(f.ctx, write)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Amend(object.Attrs{}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("amend a %s: %v", name, err)
		}
	}
}
