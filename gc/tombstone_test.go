package gc_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

var tombstones = flag.Int("tombstones", 10000, "keys TestTombstones deletes")

// countingStore counts the rows its scans return: the rows a listing
// reads from the backend.
type countingStore struct {
	meta.Store
	rows *atomic.Int64
}

func (c countingStore) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	return countingIter{c.Store.Scan(ctx, b, o), c.rows}
}

type countingIter struct {
	meta.Iter
	rows *atomic.Int64
}

func (i countingIter) Next() bool {
	if i.Iter.Next() {
		i.rows.Add(1)
		return true
	}
	return false
}

// TestTombstones deletes many keys among a few live ones and collects
// with "keep old versions one day, then drop the markers": afterwards
// every listing, the history ones included, reads only the live keys'
// rows (ADR 0025's "collect bounds it").
func TestTombstones(t *testing.T) {
	f := newFixture(t)
	f.bucket("bkt", meta.Enabled, meta.LifecycleRule{ID: "grace", Enabled: true, NoncurrentDays: 1, ExpiredObjectDeleteMarker: true})
	n, live := *tombstones, 100
	step := (n + live) / live
	f.at(0)
	for i, kept := 0, 0; i < n+live; i++ {
		key := fmt.Sprintf("k%07d", i)
		if _, err := f.svc.Put(f.ctx, "bkt", key, bytes.NewReader([]byte("x")), object.PutOptions{Size: 1}); err != nil {
			t.Fatal(err)
		}
		if i%step == 0 && kept < live {
			kept++
			continue
		}
		if _, err := f.svc.Delete(f.ctx, "bkt", key, object.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var rows atomic.Int64
	counted := countingStore{f.meta, &rows}
	b := f.b("bkt")
	listings := func() map[string]int64 {
		read := map[string]int64{}
		for name, list := range map[string]func() error{
			"List": func() error {
				_, err := meta.List(f.ctx, counted, b, meta.ListOptions{})
				return err
			},
			"ListVersions": func() error {
				_, err := meta.ListVersions(f.ctx, counted, b, meta.VersionListOptions{})
				return err
			},
			"ListAsOf": func() error {
				_, err := meta.ListAsOf(f.ctx, counted, b, f.clock.Now(), meta.ListOptions{})
				return err
			},
		} {
			rows.Store(0)
			if err := list(); err != nil {
				t.Fatal(err)
			}
			read[name] = rows.Load()
		}
		return read
	}
	before := listings()

	f.at(1, 13, 30)
	start := time.Now()
	st := f.collect(gc.Options{})
	took := time.Since(start)
	if st.NoncurrentExpired != int64(n) || st.MarkersRemoved != int64(n) {
		t.Fatalf("collected %d versions and %d markers of %d deleted keys", st.NoncurrentExpired, st.MarkersRemoved, n)
	}
	after := listings()
	t.Logf("%d deleted keys, %d live: collected %d rows in %v (%.0f rows/s); rows read before → after: %v → %v",
		n, live, st.Rows, took, float64(st.Rows)/took.Seconds(), before, after)
	for name, read := range after {
		if read > int64(live) {
			t.Errorf("%s read %d rows for %d live keys", name, read, live)
		}
	}
	if before["ListVersions"] <= int64(live) {
		t.Errorf("before collecting, ListVersions read only %d rows: the test proves nothing", before["ListVersions"])
	}
}
