package kv_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// TestManifestsApart checks that a row whose manifest is long (a small
// file's bytes) reads back whole from every read path, that its manifest
// entry goes with the row, and that rows written whole before manifests
// were kept apart still read.
func TestManifestsApart(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		var c clock
		big := func(key string) *meta.Version {
			v := c.row(key)
			v.Manifest = bytes.Repeat([]byte(key), 4096/len(key)+1)
			return v
		}
		want := map[string]*meta.Version{} // by key@id
		put := func(ms ...meta.Mutation) {
			t.Helper()
			commit(t, s, b, ms...)
			for _, m := range ms {
				if m.Put != nil {
					want[m.Key+"@"+m.Put.ID.String()] = m.Put
				}
				if !m.Delete.IsZero() {
					delete(want, m.Key+"@"+m.Delete.String())
				}
			}
		}
		apart := func() int {
			t.Helper()
			n, err := kv.Entries(s, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.CheckIndexes(s, b.ID); err != nil {
				t.Fatal(err)
			}
			return n["M"]
		}
		// check reads every row back through Get, a history scan (over
		// several batches) and a live scan of whole rows.
		check := func() {
			t.Helper()
			for k, w := range want {
				got, err := s.Get(ctx, b, w.Key, w.ID)
				if err != nil || !bytes.Equal(got.Manifest, w.Manifest) {
					t.Fatalf("Get %s: %v, manifest of %d bytes, want %d", k, err, len(got.Manifest), len(w.Manifest))
				}
			}
			vs := collect(t, s.Scan(ctx, b, meta.ScanOptions{}))
			if len(vs) != len(want) {
				t.Fatalf("history scan: %d rows, want %d", len(vs), len(want))
			}
			for _, v := range append(vs, live(t, s, b)...) {
				w := want[v.Key+"@"+v.ID.String()]
				if w == nil || !bytes.Equal(v.Manifest, w.Manifest) {
					t.Fatalf("scan %s@%s: manifest of %d bytes, want %v", v.Key, v.ID, len(v.Manifest), w)
				}
			}
		}

		var olds []*meta.Version
		for i := range 200 {
			v := big(fmt.Sprintf("k%03d", i))
			olds = append(olds, v)
			put(meta.PutMutation(b, v))
		}
		small := c.row("small")
		put(meta.PutMutation(b, small))
		if n := apart(); n != 200 {
			t.Fatalf("%d manifests kept apart, want 200 (the small row's stays in it)", n)
		}
		check()

		// A newer version, a delete marker, and the old version removed:
		// its manifest goes with it.
		put(meta.PutMutation(b, big("k000")))
		marker, _ := meta.DeleteMutation(b, "k001", "", c.t)
		marker.Put.ID = c.id()
		put(marker)
		put(meta.Mutation{Key: "k000", Delete: olds[0].ID})
		if n := apart(); n != 200 {
			t.Fatalf("%d manifests kept apart, want 200", n)
		}
		check()

		// A null row replaced drops its manifest too.
		null := big("null")
		null.Null = true
		put(meta.Mutation{Key: "null", DropNull: true, Put: null})
		again := big("null")
		again.Null = true
		put(meta.Mutation{Key: "null", DropNull: true, Put: again})
		delete(want, "null@"+null.ID.String())
		if n := apart(); n != 201 {
			t.Fatalf("%d manifests kept apart, want 201", n)
		}
		check()

		// A row written whole, as before, reads as it did.
		old := big("whole")
		if err := kv.PutWhole(s, b.ID, old); err != nil {
			t.Fatal(err)
		}
		want["whole@"+old.ID.String()] = old
		if n := apart(); n != 201 {
			t.Fatalf("%d manifests kept apart, want 201", n)
		}
		check()
	})
}
