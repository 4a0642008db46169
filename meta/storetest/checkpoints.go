package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// expectCheckpoint reads the named checkpoint, which must equal want.
func (e *env) expectCheckpoint(name string, want meta.Checkpoint) {
	e.t.Helper()
	got, err := e.s.Checkpoint(e.ctx, name)
	if err != nil || got.Name != want.Name || got.Holder != want.Holder || !got.Saved.Equal(want.Saved) ||
		got.Bucket != want.Bucket || got.Key != want.Key {
		e.t.Fatalf("Checkpoint(%q) = %+v, %v; want %+v", name, got, err, want)
	}
}

// noCheckpoint checks the named checkpoint is absent.
func (e *env) noCheckpoint(name string) {
	e.t.Helper()
	if c, err := e.s.Checkpoint(e.ctx, name); !errors.Is(err, meta.ErrNoSuchCheckpoint) {
		e.t.Fatalf("Checkpoint(%q) = %+v, %v; want ErrNoSuchCheckpoint", name, c, err)
	}
}

func (e *env) saveCheckpoint(c meta.Checkpoint) {
	e.t.Helper()
	if err := e.s.SaveCheckpoint(e.ctx, c); err != nil {
		e.t.Fatalf("SaveCheckpoint(%+v): %v", c, err)
	}
}

func testCheckpoints(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	e.noCheckpoint("gc")
	if err := e.s.DeleteCheckpoint(e.ctx, "gc"); err != nil {
		t.Fatalf("DeleteCheckpoint of an absent checkpoint: %v", err)
	}

	// A save replaces the one there; names are independent.
	first := meta.Checkpoint{Name: "gc", Holder: "a", Saved: e.now, Bucket: e.b.ID, Key: "k/é"}
	e.saveCheckpoint(first)
	e.expectCheckpoint("gc", first)
	next := meta.Checkpoint{Name: "gc", Holder: "b", Saved: e.now.Add(time.Second), Bucket: ^e.b.ID, Key: strings.Repeat("z", meta.MaxKeyLen)}
	e.saveCheckpoint(next)
	e.expectCheckpoint("gc", next)
	other := meta.Checkpoint{Name: "other", Bucket: e.b.ID, Key: "a"} // no holder, no time: both optional
	e.saveCheckpoint(other)
	e.expectCheckpoint("gc", next)
	e.expectCheckpoint("other", other)

	// They belong to no bucket, and to no lease: neither deleting the one
	// nor releasing the other takes them.
	e.acquire("gc", "b", e.now, time.Minute)
	if err := e.s.ReleaseLease(e.ctx, "gc", "b"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatal(err)
	}
	e.expectCheckpoint("gc", next)

	if err := e.s.DeleteCheckpoint(e.ctx, "gc"); err != nil {
		t.Fatalf("DeleteCheckpoint: %v", err)
	}
	e.noCheckpoint("gc")
	e.expectCheckpoint("other", other)
	// Saved again after a delete, it is there again.
	e.saveCheckpoint(first)
	e.expectCheckpoint("gc", first)

	for _, c := range []struct {
		c    meta.Checkpoint
		want error
	}{
		{meta.Checkpoint{Key: "k"}, meta.ErrInvalidArgument},
		{meta.Checkpoint{Name: "gc"}, meta.ErrInvalidKey},
		{meta.Checkpoint{Name: "gc", Key: "\xff"}, meta.ErrInvalidKey},
	} {
		if err := e.s.SaveCheckpoint(e.ctx, c.c); !errors.Is(err, c.want) {
			t.Fatalf("SaveCheckpoint(%+v): %v, want %v", c.c, err, c.want)
		}
	}
	e.expectCheckpoint("gc", first)
	if _, err := e.s.Checkpoint(e.ctx, ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("Checkpoint without a name: %v, want ErrInvalidArgument", err)
	}
	if err := e.s.DeleteCheckpoint(e.ctx, ""); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("DeleteCheckpoint without a name: %v, want ErrInvalidArgument", err)
	}
}
