package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// expectAccessKeys checks ListAccessKeys and AccessKey of each id against
// want, which is ordered by id.
func (e *env) expectAccessKeys(want ...meta.AccessKey) {
	e.t.Helper()
	got, err := e.s.ListAccessKeys(e.ctx)
	if err != nil {
		e.t.Fatalf("ListAccessKeys: %v", err)
	}
	if len(got) != len(want) {
		e.t.Fatalf("ListAccessKeys = %+v, want %+v", got, want)
	}
	for i, w := range want {
		if !sameAccessKey(got[i], w) {
			e.t.Fatalf("ListAccessKeys = %+v, want %+v", got, want)
		}
		k, err := e.s.AccessKey(e.ctx, w.ID)
		if err != nil || !sameAccessKey(k, w) {
			e.t.Fatalf("AccessKey(%q) = %+v, %v; want %+v", w.ID, k, err, w)
		}
	}
}

func sameAccessKey(a, b meta.AccessKey) bool {
	return a.ID == b.ID && a.Secret == b.Secret && a.Name == b.Name && a.Created.Equal(b.Created) && a.Root == b.Root
}

func testAccessKeys(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	created := time.Now()
	root := meta.AccessKey{ID: "AKIAROOT", Secret: "root-secret", Name: "root", Created: created, Root: true}
	alice := meta.AccessKey{ID: "AKIAALICE", Secret: "alice-secret", Name: "Alice Müller", Created: created.Add(time.Second)}
	bob := meta.AccessKey{ID: "AKIABOB", Secret: "bob-secret"}
	e.expectAccessKeys()
	for _, k := range []meta.AccessKey{root, bob, alice} {
		if err := e.s.CreateAccessKey(e.ctx, k); err != nil {
			t.Fatalf("CreateAccessKey(%q): %v", k.ID, err)
		}
	}
	e.expectAccessKeys(alice, bob, root)

	// An id in use is refused and its key left alone.
	if err := e.s.CreateAccessKey(e.ctx, meta.AccessKey{ID: bob.ID, Secret: "stolen", Root: true}); !errors.Is(err, meta.ErrAccessKeyExists) {
		t.Fatalf("CreateAccessKey of an id in use: %v, want ErrAccessKeyExists", err)
	}
	for _, k := range []meta.AccessKey{{Secret: "s"}, {ID: "AKIANOSECRET"}} {
		if err := e.s.CreateAccessKey(e.ctx, k); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("CreateAccessKey(%+v): %v, want ErrInvalidArgument", k, err)
		}
	}
	e.expectAccessKeys(alice, bob, root)

	for _, id := range []string{"AKIAMISSING", "AKIABO", "AKIABOBB", ""} {
		if k, err := e.s.AccessKey(e.ctx, id); !errors.Is(err, meta.ErrNoSuchAccessKey) {
			t.Fatalf("AccessKey(%q) = %+v, %v; want ErrNoSuchAccessKey", id, k, err)
		}
	}
	if err := e.s.DeleteAccessKey(e.ctx, bob.ID); err != nil {
		t.Fatalf("DeleteAccessKey(%q): %v", bob.ID, err)
	}
	if err := e.s.DeleteAccessKey(e.ctx, bob.ID); !errors.Is(err, meta.ErrNoSuchAccessKey) {
		t.Fatalf("DeleteAccessKey of a deleted key: %v, want ErrNoSuchAccessKey", err)
	}
	if _, err := e.s.AccessKey(e.ctx, bob.ID); !errors.Is(err, meta.ErrNoSuchAccessKey) {
		t.Fatalf("AccessKey of a deleted key: %v, want ErrNoSuchAccessKey", err)
	}
	e.expectAccessKeys(alice, root)

	// Keys are not a bucket's: deleting the bucket leaves them.
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatal(err)
	}
	e.expectAccessKeys(alice, root)
}
