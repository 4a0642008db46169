package object_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/internal/timetest"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// tree is the bucket at one instant: key → bytes.
type tree map[string][]byte

// TestTimeTravel writes, overwrites, deletes and renames keys over an hour
// of fake time, recording the bucket after every step; then the bucket as
// of chosen instants (each step's, between steps, before the first write,
// after the last) is exactly the tree recorded then, bytes included,
// through the as-of listing (in small pages) and through VersionAt.
func TestTimeTravel(t *testing.T) {
	if !timetest.Alone(t) {
		return
	}
	ctx := t.Context()
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	clock := timetest.NewClock()
	start := clock.Now()
	svc := object.New(m, d, object.Options{ChunkSize: chunk, Now: clock.Now})
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVersioning(ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(2026, 12))
	names := []string{"a", "a-b", "a/x", "a/y/z", "b", "docs/", "docs/readme", "e", "logs/1", "logs/2", "z"}
	body := func() []byte {
		n := rng.IntN(4 << 10)
		if rng.IntN(8) == 0 {
			n = chunk + rng.IntN(2*chunk) // more than one chunk
		}
		return randBytes(n)
	}

	// Step i starts at from[i], when the clock was set, and ends at at[i],
	// its last row's time; steps[i] is the tree from then until from[i+1].
	cur := tree{}
	var steps []tree
	var from, at []time.Time
	now := start
	for now.Sub(start) < time.Hour {
		now = clock.Advance(time.Duration(1+rng.IntN(40_000)) * time.Millisecond)
		live := slices.Sorted(maps.Keys(cur))
		var what string
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0: // write or overwrite
			key, b := names[rng.IntN(len(names))], body()
			if _, err := svc.Put(ctx, "bkt", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))}); err != nil {
				t.Fatal(err)
			}
			what, cur[key] = fmt.Sprintf("put %s (%d bytes)", key, len(b)), b
		case op < 7: // delete
			key := live[rng.IntN(len(live))]
			if _, err := svc.Delete(ctx, "bkt", key, object.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			what = "delete " + key
			delete(cur, key)
		default: // rename, over an existing key or not
			src, dst := live[rng.IntN(len(live))], names[rng.IntN(len(names))]
			if src == dst {
				continue
			}
			if _, err := svc.Rename(ctx, "bkt", src, dst, ""); err != nil {
				t.Fatal(err)
			}
			what = "rename " + src + " to " + dst
			cur[dst] = cur[src]
			delete(cur, src)
		}
		steps = append(steps, maps.Clone(cur))
		from, at = append(from, now), append(at, timetest.LastStamp())
		t.Logf("%s: %s", at[len(at)-1].Sub(start), what)
	}
	if len(steps) < 50 {
		t.Fatalf("only %d steps in an hour", len(steps))
	}

	check := func(what string, instant time.Time, want tree) {
		t.Helper()
		got := tree{}
		var after string
		for {
			page, err := svc.ListAsOf(ctx, "bkt", instant, meta.ListOptions{After: after, MaxKeys: 3})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, v := range page.Objects {
				r, n, err := svc.Open(ctx, v, 0, -1)
				if err != nil {
					t.Fatalf("%s: open %s: %v", what, v.Key, err)
				}
				b, err := io.ReadAll(r)
				r.Close()
				if err != nil || int64(len(b)) != n {
					t.Fatalf("%s: read %s: %d of %d bytes, %v", what, v.Key, len(b), n, err)
				}
				got[v.Key] = b
			}
			if !page.IsTruncated {
				break
			}
			after = page.Next
		}
		if diff := treeDiff(want, got); diff != "" {
			t.Fatalf("%s (%s): listing: %s", what, instant.Format(time.RFC3339Nano), diff)
		}
		for _, key := range names {
			v, err := svc.VersionAt(ctx, "bkt", key, instant)
			switch b, ok := want[key]; {
			case ok && (err != nil || v.DeleteMarker || v.Size != int64(len(b))):
				t.Fatalf("%s: VersionAt %s = %+v, %v; want %d bytes", what, key, v, err, len(b))
			case !ok && err == nil && !v.DeleteMarker:
				t.Fatalf("%s: VersionAt %s = %+v; want none", what, key, v)
			case !ok && err != nil && !meta.IsNotFound(err):
				t.Fatal(err)
			}
		}
	}

	check("before the first write", start, tree{})
	for i := range steps {
		before := tree{}
		if i > 0 {
			before = steps[i-1]
		}
		check(fmt.Sprintf("just before step %d", i), from[i].Add(-time.Nanosecond), before)
		check(fmt.Sprintf("at step %d", i), at[i], steps[i])
		if i+1 < len(steps) {
			between := at[i].Add(time.Duration(rng.Int64N(int64(from[i+1].Sub(at[i])))))
			check(fmt.Sprintf("between steps %d and %d", i, i+1), between, steps[i])
		}
	}
	check("a day after the last step", at[len(at)-1].Add(24*time.Hour), steps[len(steps)-1])
}

// treeDiff describes the first difference between two trees, or returns "".
func treeDiff(want, got tree) string {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		switch b, ok := got[k]; {
		case !ok:
			return k + " is missing"
		case !bytes.Equal(b, want[k]):
			return fmt.Sprintf("%s holds %d other bytes, want %d", k, len(b), len(want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			return k + " should not be there"
		}
	}
	return ""
}
