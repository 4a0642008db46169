package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/kv/mem"
)

// engines opens an empty store of each engine.
var engines = []struct {
	name string
	open func(t testing.TB) meta.Store
}{
	{"mem", func(testing.TB) meta.Store { return mem.New() }},
	{"bolt", func(t testing.TB) meta.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "meta.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// each runs fn against a fresh store of every engine, with one bucket.
func each(t *testing.T, v meta.Versioning, fn func(t *testing.T, s meta.Store, b meta.Bucket)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s := e.open(t)
			t.Cleanup(func() { s.Close() })
			fn(t, s, newBucket(t, s, "bucket", v))
		})
	}
}

func newBucket(t testing.TB, s meta.Store, name string, v meta.Versioning) meta.Bucket {
	b, err := meta.NewBucket(name, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.Versioning = v
	if err := s.CreateBucket(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// clock issues version ids one millisecond apart.
type clock struct{ t time.Time }

func (c *clock) id() meta.VersionID {
	c.t = c.t.Add(time.Millisecond)
	return meta.NewVersionID(c.t)
}

// row returns a new row of key whose manifest, as a small object's, is
// most of it.
func (c *clock) row(key string) *meta.Version {
	return &meta.Version{Key: key, ID: c.id(), Size: 1, ETag: "e", Manifest: bytes.Repeat([]byte{'m'}, 100)}
}

func collect(t testing.TB, it meta.Iter) []*meta.Version {
	t.Helper()
	defer it.Close()
	var vs []*meta.Version
	for it.Next() {
		vs = append(vs, it.Version())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func ids(vs []*meta.Version) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Key+"@"+v.ID.String())
	}
	return out
}

// live returns the live rows of the bucket, checking first that the live
// index agrees with the live view of the history and with the rows.
func live(t *testing.T, s meta.Store, b meta.Bucket) []*meta.Version {
	t.Helper()
	ctx := context.Background()
	got := collect(t, s.Scan(ctx, b, meta.ScanOptions{Live: true}))
	want := collect(t, meta.LiveIter(s.Scan(ctx, b, meta.ScanOptions{})))
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("live index %v, live view of the history %v", ids(got), ids(want))
	}
	if err := kv.CheckIndexes(s, b.ID); err != nil {
		t.Fatal(err)
	}
	return got
}

func commit(t *testing.T, s meta.Store, b meta.Bucket, ms ...meta.Mutation) {
	t.Helper()
	if err := s.Commit(context.Background(), b, ms...); err != nil {
		t.Fatal(err)
	}
}

func TestLiveIndex(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		c := &clock{t: time.Now()}
		put := func(v *meta.Version) *meta.Version {
			commit(t, s, b, meta.PutMutation(b, v))
			return v
		}
		del := func(v *meta.Version) {
			commit(t, s, b, meta.Mutation{Key: v.Key, Delete: v.ID})
		}
		marker := func(key string) *meta.Version {
			m, v := meta.DeleteMutation(b, key, "", c.t.Add(time.Millisecond))
			c.t = c.t.Add(time.Millisecond)
			commit(t, s, b, m)
			return v
		}
		expect := func(step string, want ...*meta.Version) {
			t.Helper()
			if got := live(t, s, b); !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("%s: live %v, want %v", step, ids(got), ids(want))
			}
		}

		other := put(c.row("l"))
		v1 := put(c.row("k"))
		expect("put", v1, other)
		v2 := put(c.row("k"))
		expect("second put", v2, other)
		m := marker("k")
		expect("delete marker", other)
		del(m)
		expect("marker removed", v2, other)
		del(v2)
		expect("head removed", v1, other)
		m2 := marker("k")
		v3 := put(c.row("k"))
		expect("put over marker", v3, other)
		del(v3)
		expect("head removed onto marker", other)
		del(m2)
		expect("marker removed again", v1, other)
		del(v1)
		expect("last row removed", other)
		// An old row written below the head leaves the index alone.
		v4 := put(c.row("k"))
		commit(t, s, b, meta.Mutation{Key: "k", Put: &meta.Version{Key: "k", ID: meta.AsOf(time.Unix(1, 0))}})
		expect("row below the head", v4, other)
	})
}

func TestNullRows(t *testing.T) {
	each(t, meta.Suspended, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		c := &clock{t: time.Now()}
		n1 := c.row("k")
		commit(t, s, b, meta.PutMutation(b, n1))
		n2 := c.row("k")
		commit(t, s, b, meta.PutMutation(b, n2))
		if got := live(t, s, b); !slices.Equal(ids(got), ids([]*meta.Version{n2})) {
			t.Fatalf("live %v, want only the replacing null row", ids(got))
		}
		if _, err := s.Get(ctx, b, "k", n1.ID); !errors.Is(err, meta.ErrNoSuchVersion) {
			t.Fatalf("replaced null row: %v, want ErrNoSuchVersion", err)
		}
		m, marker := meta.DeleteMutation(b, "k", "", c.t.Add(time.Millisecond))
		commit(t, s, b, m)
		if got := live(t, s, b); len(got) != 0 {
			t.Fatalf("live after null delete marker: %v", ids(got))
		}
		got, err := s.GetNull(ctx, b, "k")
		if err != nil || got.ID != marker.ID || !got.DeleteMarker {
			t.Fatalf("null row = %+v, %v; want the marker %s", got, err, marker.ID)
		}
		// A null PUT that would leave two null rows is refused.
		err = s.Commit(ctx, b, meta.Mutation{Key: "k", Put: &meta.Version{Key: "k", ID: c.id(), Null: true}})
		if !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("second null row: %v, want ErrInvalidArgument", err)
		}
		// Deleting the null row by id clears the null index.
		commit(t, s, b, meta.Mutation{Key: "k", Delete: marker.ID})
		if _, err := s.GetNull(ctx, b, "k"); !errors.Is(err, meta.ErrNoSuchVersion) {
			t.Fatalf("null row after its delete: %v, want ErrNoSuchVersion", err)
		}
		live(t, s, b)
	})
}

func TestCommitAtomic(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		c := &clock{t: time.Now()}
		errCheck := errors.New("precondition failed")
		for name, tc := range map[string]struct {
			bad  meta.Mutation
			want error
		}{
			"missing version": {meta.Mutation{Key: "b", Delete: c.id()}, meta.ErrNoSuchVersion},
			"failed check":    {meta.Mutation{Key: "b", Check: func(*meta.Version) error { return errCheck }}, errCheck},
			"invalid key":     {meta.Mutation{Key: ""}, meta.ErrInvalidKey},
			"foreign put":     {meta.Mutation{Key: "b", Put: c.row("a")}, meta.ErrInvalidArgument},
			"zero id":         {meta.Mutation{Key: "b", Put: &meta.Version{Key: "b"}}, meta.ErrInvalidVersionID},
		} {
			err := s.Commit(ctx, b, meta.Mutation{Key: "a", Put: c.row("a")}, tc.bad)
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", name, err, tc.want)
			}
		}
		if rows := collect(t, s.Scan(ctx, b, meta.ScanOptions{})); len(rows) != 0 {
			t.Fatalf("failed commits left rows %v", ids(rows))
		}
		live(t, s, b)

		v := c.row("a")
		commit(t, s, b, meta.Mutation{Key: "a", Put: v})
		dup := *v
		if err := s.Commit(ctx, b, meta.Mutation{Key: "a", Put: &dup}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("rewriting a row: %v, want ErrInvalidArgument", err)
		}
		var seen *meta.Version
		commit(t, s, b, meta.Mutation{Key: "a", Check: func(h *meta.Version) error { seen = h; return nil }})
		if seen == nil || seen.ID != v.ID {
			t.Fatalf("check saw head %+v, want %s", seen, v.ID)
		}
	})
}

func TestCommitConcurrent(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		const n = 50
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				v := &meta.Version{Key: "k", ID: meta.NewVersionID(time.Now()), Size: int64(i)}
				errs <- s.Commit(ctx, b, meta.PutMutation(b, v))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		rows := collect(t, s.Scan(ctx, b, meta.ScanOptions{}))
		if len(rows) != n {
			t.Fatalf("%d rows, want %d", len(rows), n)
		}
		heads := live(t, s, b)
		if len(heads) != 1 || heads[0].ID != rows[0].ID {
			t.Fatalf("live %v, want only the newest row %s", ids(heads), rows[0].ID)
		}
	})
}

func TestBuckets(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		if err := s.CreateBucket(ctx, b); !errors.Is(err, meta.ErrBucketExists) {
			t.Fatalf("create twice: %v, want ErrBucketExists", err)
		}
		if _, err := s.UpdateBucket(ctx, b.Name, func(b *meta.Bucket) error { b.ID++; return nil }); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("update changing the id: %v, want ErrInvalidArgument", err)
		}
		v := (&clock{t: time.Now()}).row("k")
		commit(t, s, b, meta.Mutation{Key: "k", Put: v})
		if err := s.DeleteBucket(ctx, b.Name); !errors.Is(err, meta.ErrBucketNotEmpty) {
			t.Fatalf("delete non-empty: %v, want ErrBucketNotEmpty", err)
		}
		commit(t, s, b, meta.Mutation{Key: "k", Delete: v.ID})
		if err := s.DeleteBucket(ctx, b.Name); err != nil {
			t.Fatal(err)
		}
		// A commit carrying the old bucket's record must not write rows
		// under its dead id, even once the name is taken again.
		if err := s.Commit(ctx, b, meta.Mutation{Key: "k", Put: v}); !errors.Is(err, meta.ErrNoSuchBucket) {
			t.Fatalf("commit to a deleted bucket: %v, want ErrNoSuchBucket", err)
		}
		newBucket(t, s, b.Name, meta.Enabled)
		if err := s.Commit(ctx, b, meta.Mutation{Key: "k", Put: v}); !errors.Is(err, meta.ErrNoSuchBucket) {
			t.Fatalf("commit to a recreated bucket: %v, want ErrNoSuchBucket", err)
		}
	})
}

// TestScanBatches walks more rows than one batch holds, seeking forward
// and back, inside and outside the current batch.
func TestScanBatches(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		c := &clock{t: time.Now()}
		var ms []meta.Mutation
		var all []*meta.Version // in scan order
		for i := range 300 {
			key := fmt.Sprintf("k%03d", i)
			var vs []*meta.Version
			for range 3 {
				v := c.row(key)
				ms = append(ms, meta.Mutation{Key: key, Put: v})
				vs = append(vs, v)
			}
			slices.Reverse(vs) // newest first
			all = append(all, vs...)
		}
		commit(t, s, b, ms...)
		other := newBucket(t, s, "other", meta.Enabled)
		commit(t, s, other, meta.Mutation{Key: "k000", Put: c.row("k000")})

		if got := collect(t, s.Scan(ctx, b, meta.ScanOptions{})); !slices.Equal(ids(got), ids(all)) {
			t.Fatalf("history scan returned %d rows, want %d in order", len(got), len(all))
		}
		it := s.Scan(ctx, b, meta.ScanOptions{Prefix: "k1"})
		defer it.Close()
		step := func(want *meta.Version) {
			t.Helper()
			if !it.Next() {
				t.Fatalf("end of scan (%v), want %s", it.Err(), ids([]*meta.Version{want}))
			}
			if got := it.Version(); got.Key != want.Key || got.ID != want.ID {
				t.Fatalf("row %v, want %v", ids([]*meta.Version{got}), ids([]*meta.Version{want}))
			}
		}
		at := func(i int) *meta.Version { return all[i] }
		step(at(300)) // k100, newest
		it.Seek("k100", all[302].ID)
		step(at(302))
		it.Seek("k100\x00", meta.VersionID{}) // skip the rest of the key
		step(at(303))
		for range 150 { // read past a few batches
			it.Next()
		}
		it.Seek("k101", meta.VersionID{}) // back, before the batch
		step(at(303))
		it.Seek("a", meta.VersionID{}) // before the prefix
		step(at(300))
		it.Seek(meta.PrefixEnd("k19"), meta.VersionID{})
		if it.Next() {
			t.Fatalf("row %v after the prefix", ids([]*meta.Version{it.Version()}))
		}

		it = s.Scan(ctx, b, meta.ScanOptions{Prefix: "k2", Live: true})
		defer it.Close()
		step(at(600))
		it.Seek("k250", all[751].ID) // a live scan ignores the id
		step(at(750))
		step(at(753))
	})
}

// TestSeekModel checks random walks of Next and Seek against positions
// computed on the full scan, for history and live scans under a prefix.
func TestSeekModel(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		r := rand.New(rand.NewPCG(3, 4))
		c := &clock{t: time.Now()}
		var keys []string
		var ms []meta.Mutation
		for i := range 400 {
			key := fmt.Sprintf("p%d\x00%d", i%3, i)
			keys = append(keys, key, key+"\x00", meta.PrefixEnd(key))
			for range r.IntN(4) {
				ms = append(ms, meta.Mutation{Key: key, Put: c.row(key)})
			}
			if r.IntN(4) == 0 {
				ms = append(ms, meta.Mutation{Key: key, Put: &meta.Version{Key: key, ID: c.id(), DeleteMarker: true}})
			}
		}
		commit(t, s, b, ms...)
		for _, o := range []meta.ScanOptions{{Prefix: "p1"}, {Prefix: "p1", Live: true}, {}} {
			rows := collect(t, s.Scan(ctx, b, o))
			var ids []meta.VersionID
			for _, v := range rows {
				ids = append(ids, v.ID)
			}
			it := s.Scan(ctx, b, o)
			p := 0
			for step := range 3000 {
				if r.IntN(8) == 0 {
					key, id := keys[r.IntN(len(keys))], meta.VersionID{}
					if r.IntN(2) == 0 {
						id = ids[r.IntN(len(ids))]
					}
					it.Seek(key, id)
					p, _ = slices.BinarySearchFunc(rows, key, func(v *meta.Version, _ string) int {
						if v.Key != key {
							return strings.Compare(v.Key, key)
						}
						if o.Live {
							return 0
						}
						return v.ID.Compare(id)
					})
					continue
				}
				if ok := it.Next(); ok != (p < len(rows)) || ok && it.Version().ID != rows[p].ID {
					t.Fatalf("%+v step %d: Next = %v, want row %d of %d", o, step, ok, p, len(rows))
				}
				p = min(p+1, len(rows))
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestScanRowsOwnTheirBytes checks that the rows a scan returns keep their
// bytes after it is closed: closed iterators hand their buffers to the
// next scan, which must not write into rows already returned.
func TestScanRowsOwnTheirBytes(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		c := &clock{t: time.Now()}
		fill := func(b meta.Bucket, seed byte) {
			var ms []meta.Mutation
			for i := range 200 {
				v := c.row(fmt.Sprintf("k%03d", i))
				v.Manifest = bytes.Repeat([]byte{seed + byte(i)}, 4<<10)
				ms = append(ms, meta.Mutation{Key: v.Key, Put: v})
			}
			commit(t, s, b, ms...)
		}
		other := newBucket(t, s, "other", meta.Enabled)
		fill(b, 0)
		fill(other, 100)
		first := collect(t, s.Scan(ctx, b, meta.ScanOptions{Live: true}))
		for range 3 {
			collect(t, s.Scan(ctx, other, meta.ScanOptions{Live: true}))
		}
		for i, v := range first {
			if want := bytes.Repeat([]byte{byte(i)}, 4<<10); !bytes.Equal(v.Manifest, want) {
				t.Fatalf("row %s: manifest changed after later scans (first byte %d, want %d)", v.Key, v.Manifest[0], i)
			}
		}
	})
}
