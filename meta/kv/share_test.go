package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/log"
	"go.uber.org/zap"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/kv/tikv"
)

// withTiKV is engines and client-go's mock TiKV cluster, whose snapshot
// isolation is what the holder counts are written for.
var withTiKV = append(engines[:len(engines):len(engines)], struct {
	name string
	open func(t testing.TB) meta.Store
}{"tikv", func(t testing.TB) meta.Store {
	// client-go warns on every commit the mock cannot do in one phase.
	log.SetLevel(zap.ErrorLevel)
	s, err := tikv.NewMock("share")
	if err != nil {
		t.Fatal(err)
	}
	return s
}})

// TestSharedManifests drives random puts, shares (renames and chmods,
// some replacing the row they share), removals and delete markers, and
// checks after every step that each row reads its own bytes, that the
// entries kept beside rows are exactly what the rows imply
// (kv.CheckIndexes), and at the end, with every row removed, that no
// manifest, shared entry or holder count is left.
func TestSharedManifests(t *testing.T) {
	for _, e := range withTiKV {
		for _, v := range []meta.Versioning{meta.Enabled, meta.Suspended} {
			t.Run(e.name+"/"+v.String(), func(t *testing.T) {
				s := e.open(t)
				t.Cleanup(func() { s.Close() })
				randomShares(t, s, newBucket(t, s, "bucket", v), rand.New(rand.NewPCG(1, uint64(v))))
			})
		}
	}
}

func randomShares(t *testing.T, s meta.Store, b meta.Bucket, rng *rand.Rand) {
	ctx := context.Background()
	c := clock{t: time.Now()}
	want := map[string]*meta.Version{} // by key@id: every row but markers
	var markers []*meta.Version
	name := func(v *meta.Version) string { return v.Key + "@" + v.ID.String() }
	pick := func() *meta.Version {
		var vs []*meta.Version
		for _, v := range want {
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			return nil
		}
		// Map order is random but not seeded: sort for a replayable run.
		slices.SortFunc(vs, func(a, b *meta.Version) int { return strings.Compare(name(a), name(b)) })
		return vs[rng.IntN(len(vs))]
	}
	keys := []string{"a", "b", "c", "d/e"}
	apply := func(step string, ms ...meta.Mutation) {
		t.Helper()
		if err := s.Commit(ctx, b, ms...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		// The bytes each put shares, read before any row goes.
		puts := make([]*meta.Version, len(ms))
		for i, m := range ms {
			if p := m.Put; p != nil && !p.DeleteMarker {
				w := *p
				if p.ManifestOf != nil {
					w.Manifest, w.ManifestOf = want[p.ManifestOf.Key+"@"+p.ManifestOf.ID.String()].Manifest, nil
				}
				puts[i] = &w
			}
		}
		for i, m := range ms {
			// A null row written drops the key's previous null row.
			if m.DropNull {
				for k, v := range want {
					if v.Key == m.Key && v.Null {
						delete(want, k)
					}
				}
				markers = slices.DeleteFunc(markers, func(v *meta.Version) bool { return v.Key == m.Key && v.Null })
			}
			if !m.Delete.IsZero() {
				delete(want, m.Key+"@"+m.Delete.String())
				markers = slices.DeleteFunc(markers, func(v *meta.Version) bool { return v.Key == m.Key && v.ID == m.Delete })
			}
			switch {
			case puts[i] != nil:
				want[name(puts[i])] = puts[i]
			case m.Put != nil:
				markers = append(markers, m.Put)
			}
		}
		for k, w := range want {
			got, err := s.Get(ctx, b, w.Key, w.ID)
			if err != nil || !bytes.Equal(got.Manifest, w.Manifest) {
				t.Fatalf("%s: Get %s: %v, want its own %d bytes", step, k, err, len(w.Manifest))
			}
		}
		rows := collect(t, s.Scan(ctx, b, meta.ScanOptions{}))
		if len(rows) != len(want)+len(markers) {
			t.Fatalf("%s: %d rows, want %d and %d markers", step, len(rows), len(want), len(markers))
		}
		for _, v := range rows {
			if w := want[name(v)]; w != nil && !bytes.Equal(v.Manifest, w.Manifest) {
				t.Fatalf("%s: scan of %s: %d bytes, not its own", step, name(v), len(v.Manifest))
			}
		}
		if err := kv.CheckIndexes(s, b.ID); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	newRow := func(key string) *meta.Version {
		v := c.row(key)
		if rng.IntN(4) > 0 { // most kept apart
			v.Manifest = make([]byte, 600+rng.IntN(4000))
			for i := range v.Manifest {
				v.Manifest[i] = byte(rng.Uint32())
			}
		}
		return v
	}
	shareOf := func(key string, of *meta.Version) *meta.Version {
		return &meta.Version{Key: key, ID: c.id(), Size: of.Size, ETag: "shared", NoManifest: true, ManifestOf: &meta.RowRef{Key: of.Key, ID: of.ID}}
	}
	for step := range 300 {
		key := keys[rng.IntN(len(keys))]
		of := pick()
		switch op := rng.IntN(10); {
		case op < 3 || of == nil:
			apply(fmt.Sprintf("%d: put %s", step, key), meta.PutMutation(b, newRow(key)))
		case op < 5 && key != of.Key: // a rename: the new row, then the old row's removal
			apply(fmt.Sprintf("%d: rename %s to %s", step, name(of), key),
				meta.PutMutation(b, shareOf(key, of)), meta.Mutation{Key: of.Key, Delete: of.ID})
		case op < 6: // a copy, in a versioned bucket a rename
			before := entries(t, s, b)
			apply(fmt.Sprintf("%d: share %s as %s", step, name(of), key), meta.PutMutation(b, shareOf(key, of)))
			// A manifest kept apart is not copied: the new row names it.
			if after := entries(t, s, b); len(of.Manifest) > 512 && after["M"] > before["M"] {
				t.Fatalf("%d: sharing %s made %d M entries of %d", step, name(of), after["M"], before["M"])
			}
		case op < 7: // a chmod replacing the row it shares
			m := meta.PutMutation(b, shareOf(of.Key, of))
			if !of.Null || !m.DropNull {
				m.Delete = of.ID
			}
			apply(fmt.Sprintf("%d: replace %s", step, name(of)), m)
		case op < 9:
			apply(fmt.Sprintf("%d: remove %s", step, name(of)), meta.Mutation{Key: of.Key, Delete: of.ID})
		default:
			m, _ := meta.DeleteMutation(b, key, "", c.t)
			m.Put.ID = c.id()
			apply(fmt.Sprintf("%d: delete %s", step, key), m)
		}
	}
	for of := pick(); of != nil; of = pick() {
		apply("remove "+name(of), meta.Mutation{Key: of.Key, Delete: of.ID})
	}
	for _, m := range slices.Clone(markers) {
		apply("remove marker "+name(m), meta.Mutation{Key: m.Key, Delete: m.ID})
	}
	n := entries(t, s, b)
	for space, count := range n {
		if count > 0 {
			t.Errorf("every row removed, %d entries left in %s: %v", count, space, n)
		}
	}
}

// TestShareRacesRemoval races, round after round, the removal of a row
// against a row sharing its manifest: whichever commits first, the
// sharing row (if written) reads the bytes, and no manifest outlives its
// last reader. On TiKV the two transactions write no common V or M key;
// the holder count is what makes one of them fail and run again.
func TestShareRacesRemoval(t *testing.T) {
	for _, e := range withTiKV {
		t.Run(e.name, func(t *testing.T) {
			s := e.open(t)
			t.Cleanup(func() { s.Close() })
			b := newBucket(t, s, "bucket", meta.Enabled)
			ctx := context.Background()
			c := clock{t: time.Now()}
			shared := 0
			for round := range 30 {
				home := c.row(fmt.Sprintf("home%d", round))
				home.Manifest = bytes.Repeat([]byte{byte(round)}, 4096)
				commit(t, s, b, meta.PutMutation(b, home))
				var sharer *meta.Version
				if round%2 == 1 { // the row removed shares another itself
					first := home
					home = &meta.Version{Key: first.Key + "/2", ID: c.id(), Size: 1, ETag: "e", NoManifest: true, ManifestOf: &meta.RowRef{Key: first.Key, ID: first.ID}}
					commit(t, s, b, meta.PutMutation(b, home), meta.Mutation{Key: first.Key, Delete: first.ID})
				}
				sharer = &meta.Version{Key: fmt.Sprintf("sharer%d", round), ID: c.id(), Size: 1, ETag: "e", NoManifest: true, ManifestOf: &meta.RowRef{Key: home.Key, ID: home.ID}}
				var wg sync.WaitGroup
				var shareErr, removeErr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					shareErr = s.Commit(ctx, b, meta.PutMutation(b, sharer))
				}()
				go func() {
					defer wg.Done()
					removeErr = s.Commit(ctx, b, meta.Mutation{Key: home.Key, Delete: home.ID})
				}()
				wg.Wait()
				if removeErr != nil {
					t.Fatalf("round %d: remove: %v", round, removeErr)
				}
				switch {
				case shareErr == nil:
					shared++
					got, err := s.Get(ctx, b, sharer.Key, sharer.ID)
					if err != nil || !bytes.Equal(got.Manifest, bytes.Repeat([]byte{byte(round)}, 4096)) {
						t.Fatalf("round %d: the sharing row reads %v, not the bytes it shares", round, err)
					}
					commit(t, s, b, meta.Mutation{Key: sharer.Key, Delete: sharer.ID})
				case !errors.Is(shareErr, meta.ErrConflict):
					t.Fatalf("round %d: share: %v, want success or ErrConflict", round, shareErr)
				}
				if err := kv.CheckIndexes(s, b.ID); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if n := entries(t, s, b); n["M"]+n["S"]+n["H"] != 0 {
					t.Fatalf("round %d: entries left once every row is gone: %v", round, n)
				}
			}
			t.Logf("%d of 30 shares committed", shared)
		})
	}
}

// entries counts the engine entries of b in each space.
func entries(t *testing.T, s meta.Store, b meta.Bucket) map[string]int {
	t.Helper()
	n, err := kv.Entries(s, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
