package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// scanPrefixes are the prefixes the scan cases iterate under.
var scanPrefixes = []string{"", "a", "a/", "a/b/", "日本/", "q"}

// underPrefix returns the rows of rs whose key starts with p.
func underPrefix(rs []*meta.Version, p string) []*meta.Version {
	return slices.DeleteFunc(slices.Clone(rs), func(v *meta.Version) bool { return !strings.HasPrefix(v.Key, p) })
}

func testLiveScan(e *env) {
	for _, p := range scanPrefixes {
		want := underPrefix(e.m.live(meta.VersionID{}), p)
		e.expectScan(meta.ScanOptions{Prefix: p, Live: true}, want)
		e.expectScan(meta.ScanOptions{Prefix: p}, underPrefix(e.m.rows, p))
		got, err := drain(meta.LiveIter(e.s.Scan(e.ctx, e.b, meta.ScanOptions{Prefix: p})))
		if err != nil {
			e.t.Fatalf("LiveIter(Scan(%q)): %v", p, err)
		}
		e.expectRows(fmt.Sprintf("LiveIter(Scan(%q))", p), got, want)
	}
}

// testSkipKey walks a history scan seeking past each key as soon as its
// first row is read, and past each prefix as soon as a key under it is:
// the walk must meet exactly each key's first row, once per key or prefix.
func testSkipKey(e *env) {
	for _, p := range scanPrefixes {
		for _, delim := range []string{"", "/"} {
			it := e.s.Scan(e.ctx, e.b, meta.ScanOptions{Prefix: p})
			var got []*meta.Version
			for it.Next() {
				v := it.Version()
				got = append(got, v)
				next := v.Key + "\x00"
				if i := strings.Index(v.Key[len(p):], delim); delim != "" && i >= 0 {
					next = meta.PrefixEnd(v.Key[:len(p)+i+len(delim)])
				}
				it.Seek(next, meta.VersionID{})
			}
			if err := it.Err(); err != nil {
				e.t.Fatal(err)
			}
			it.Close()
			var want []*meta.Version
			for _, en := range entries(e.m.rows, p, delim) {
				switch {
				case en.v == nil:
					want = append(want, e.m.rows[firstUnder(e.m.rows, en.prefix)])
				case en.latest:
					want = append(want, en.v)
				}
			}
			e.expectRows(fmt.Sprintf("Scan(%q) skipping keys and prefixes at %q", p, delim), got, want)
		}
	}
}

// firstUnder returns the index of the first row under prefix p.
func firstUnder(rs []*meta.Version, p string) int {
	return slices.IndexFunc(rs, func(v *meta.Version) bool { return strings.HasPrefix(v.Key, p) })
}

// A target is a position to seek to.
type target struct {
	key string
	id  meta.VersionID
}

// seekTargets returns positions at, between and around the rows of rs.
func seekTargets(rs []*meta.Version) []target {
	ts := []target{{"", meta.VersionID{}}, {"z\U0010ffff\x00", meta.VersionID{}}}
	for _, v := range rs {
		ts = append(ts,
			target{v.Key, v.ID},
			target{v.Key, meta.VersionID{}},
			target{v.Key + "\x00", meta.VersionID{}},
			target{meta.PrefixEnd(v.Key), meta.VersionID{}},
			target{v.Key, meta.AsOf(v.ID.Time().Add(-time.Nanosecond))},
			target{v.Key, meta.AsOf(v.ID.Time().Add(time.Nanosecond))},
		)
	}
	return ts
}

// testSeek seeks a history and a live scan to every target in a random
// order, back and forth, before the first Next, after the last, and
// checks the two rows that follow each seek. A live scan ignores ids.
func testSeek(e *env) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range scanPrefixes {
		for _, live := range []bool{false, true} {
			rows := e.m.rows
			if live {
				rows = e.m.live(meta.VersionID{})
			}
			rows = underPrefix(rows, p)
			ts := seekTargets(e.m.rows)
			r.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
			it := e.s.Scan(e.ctx, e.b, meta.ScanOptions{Prefix: p, Live: live})
			for _, tg := range ts {
				it.Seek(tg.key, tg.id)
				i := slices.IndexFunc(rows, func(v *meta.Version) bool {
					if c := strings.Compare(v.Key, tg.key); c != 0 || live {
						return c >= 0
					}
					return v.ID.Compare(tg.id) >= 0
				})
				if i < 0 {
					i = len(rows)
				}
				want := rows[i:min(i+2, len(rows))]
				var got []*meta.Version
				for len(got) < 2 && it.Next() {
					got = append(got, it.Version())
				}
				e.expectRows(fmt.Sprintf("Scan(%q, live %v) after Seek(%q, %s)", p, live, tg.key, tg.id), got, want)
			}
			if err := it.Err(); err != nil {
				e.t.Fatal(err)
			}
			if err := it.Close(); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}
