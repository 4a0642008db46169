package gc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

func TestFilter(t *testing.T) {
	const n = 100000
	f := newFilter(n, falsePositive)
	ids := make([]data.ChunkID, n)
	for i := range ids {
		ids[i] = data.NewChunkID()
		f.add(ids[i])
	}
	for _, id := range ids {
		if !f.has(id) {
			t.Fatalf("filter lost %s", id)
		}
	}
	fp := 0
	for range n {
		if f.has(data.NewChunkID()) {
			fp++
		}
	}
	// 100 expected; far more means the hashing is broken.
	if rate := float64(fp) / n; rate > 2*falsePositive {
		t.Errorf("false-positive rate %.5f, want about %.5f", rate, falsePositive)
	}
	if perID := float64(f.size()) / n; perID > 1.9 {
		t.Errorf("%.2f bytes per id, want about 1.8", perID)
	}
}

func TestFilterSeedsDiffer(t *testing.T) {
	// Two runs' filters must not keep the same garbage: find ids one
	// filter falsely claims and check the other mostly does not.
	a, b := newFilter(1024, 0.1), newFilter(1024, 0.1)
	for range 1024 {
		id := data.NewChunkID()
		a.add(id)
		b.add(id)
	}
	both, onlyA := 0, 0
	for range 20000 {
		id := data.NewChunkID()
		if a.has(id) {
			onlyA++
			if b.has(id) {
				both++
			}
		}
	}
	if onlyA == 0 || float64(both)/float64(onlyA) > 0.3 {
		t.Errorf("of %d false positives of one filter, the other shares %d", onlyA, both)
	}
}

// TestSweeperGuard checks the two orders in which a commit that shares a
// chunk and the sweep that finds it unreferenced can meet.
func TestSweeperGuard(t *testing.T) {
	ctx := context.Background()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func() data.ChunkID {
		id := data.NewChunkID()
		if err := d.Put(ctx, id, []byte("bytes")); err != nil {
			t.Fatal(err)
		}
		return id
	}
	m := mem.New()
	s := newSweeper(object.New(m, d, object.Options{}), 10)
	pinned, doomed := put(), put()
	// Both condemned an hour before the sweep, which may delete them.
	s.since = time.Now()
	s.due = s.since.Add(-time.Hour)
	if err := m.Condemn(ctx, s.due, [][16]byte{pinned, doomed}); err != nil {
		t.Fatal(err)
	}

	// Pinned first: the sweep keeps it.
	if err := s.pin(ctx, []data.ChunkID{pinned}); err != nil {
		t.Fatal(err)
	}
	gone, _, err := s.collect(ctx, []chunk{{id: pinned}, {id: doomed}}, false)
	if err != nil || len(gone) != 1 || gone[0].id != doomed {
		t.Fatalf("collect = %v, %v; want only the unpinned chunk", gone, err)
	}
	if err := exists(ctx, d, pinned); err != nil {
		t.Fatalf("pinned chunk: %v", err)
	}

	// Collected first: the commit that wants it is refused.
	if err := s.pin(ctx, []data.ChunkID{pinned, doomed}); !errors.Is(err, data.ErrNoSuchChunk) {
		t.Fatalf("pin of a collected chunk: %v, want ErrNoSuchChunk", err)
	}
}
