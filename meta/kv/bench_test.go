package kv_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// benchRow is a row of typical size: an ETag, a content type, a manifest
// naming one chunk.
func benchRow(key string, id meta.VersionID) *meta.Version {
	return &meta.Version{
		Key: key, ID: id, Size: 4096,
		ETag:     "d41d8cd98f00b204e9800998ecf8427e",
		Content:  meta.Content{Type: "application/octet-stream"},
		Owner:    "AKIAIOSFODNN7EXAMPLE",
		Manifest: make([]byte, 40),
	}
}

// tombstoneBuckets fills two buckets with n live keys each: "clean" holds
// nothing else; "tomb" also holds 100·n deleted keys, interleaved with the
// live ones, each with 10 versions (9 objects under a delete marker).
func tombstoneBuckets(b *testing.B, s meta.Store, n int) (clean, tomb meta.Bucket) {
	ctx := context.Background()
	clean = newBucket(b, s, "clean", meta.Enabled)
	tomb = newBucket(b, s, "tomb", meta.Enabled)
	now := time.Now()
	id := func() meta.VersionID {
		now = now.Add(time.Microsecond)
		return meta.NewVersionID(now)
	}
	var ms []meta.Mutation
	flush := func(bk meta.Bucket) {
		if err := s.Commit(ctx, bk, ms...); err != nil {
			b.Fatal(err)
		}
		ms = ms[:0]
	}
	for i := range n {
		key := fmt.Sprintf("k%08d", i*101)
		ms = append(ms, meta.Mutation{Key: key, Put: benchRow(key, id())})
	}
	flush(clean)
	for i := range 101 * n {
		key := fmt.Sprintf("k%08d", i)
		if i%101 == 0 {
			ms = append(ms, meta.Mutation{Key: key, Put: benchRow(key, id())})
		} else {
			for range 9 {
				ms = append(ms, meta.Mutation{Key: key, Put: benchRow(key, id())})
			}
			m := &meta.Version{Key: key, ID: id(), DeleteMarker: true}
			ms = append(ms, meta.Mutation{Key: key, Put: m})
		}
		if len(ms) >= 10000 {
			flush(tomb)
		}
	}
	flush(tomb)
	return clean, tomb
}

// BenchmarkListTombstones lists n live keys from a clean bucket and from
// one where they hide among 100·n deleted keys of 10 versions each, via
// the live index (Live: true) and via meta.LiveIter over a history scan.
// It reports both rates and tomb/clean, the slowdown the tombstones cause
// (DESIGN.md's target for KV backends: ≤ 1.5).
func BenchmarkListTombstones(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			defer s.Close()
			clean, tomb := tombstoneBuckets(b, s, n)
			for _, m := range []struct {
				name string
				scan func(meta.Bucket) meta.Iter
			}{
				{"index", func(bk meta.Bucket) meta.Iter { return s.Scan(ctx, bk, meta.ScanOptions{Live: true}) }},
				{"liveiter", func(bk meta.Bucket) meta.Iter { return meta.LiveIter(s.Scan(ctx, bk, meta.ScanOptions{})) }},
			} {
				b.Run(m.name, func(b *testing.B) {
					list := func(bk meta.Bucket) time.Duration {
						start := time.Now()
						if got := len(collect(b, m.scan(bk))); got != n {
							b.Fatalf("listed %d keys, want %d", got, n)
						}
						return time.Since(start)
					}
					var tc, tt time.Duration
					for b.Loop() {
						tc += list(clean)
						tt += list(tomb)
					}
					b.ReportMetric(float64(n*b.N)/tc.Seconds(), "clean-entries/s")
					b.ReportMetric(float64(n*b.N)/tt.Seconds(), "tomb-entries/s")
					b.ReportMetric(tt.Seconds()/tc.Seconds(), "tomb/clean")
				})
			}
		})
	}
}

// BenchmarkCommit measures PUTs, one Commit each, from 1 and 16 writers:
// on bolt, concurrent commits share a transaction and its fsync.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	for _, e := range engines {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/writers=%d", e.name, writers), func(b *testing.B) {
				s := e.open(b)
				defer s.Close()
				bk := newBucket(b, s, "bench", meta.Enabled)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := range writers {
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							key := fmt.Sprintf("w%d/k%d", w, i%100)
							if err := s.Commit(ctx, bk, meta.PutMutation(bk, benchRow(key, meta.NewVersionID(time.Now())))); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}
