package gc_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// benchStores are the meta stores the benchmarks run on: in memory and
// the embedded default.
var benchStores = []struct {
	name string
	open func(b *testing.B) meta.Store
}{
	{"mem", func(*testing.B) meta.Store { return mem.New() }},
	{"bolt", func(b *testing.B) meta.Store {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "meta.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// BenchmarkRun measures a collection over a bucket of keys with two
// versions each (inline, so that rows, not chunks, are what costs):
// "scan" expires nothing, "expire" removes every noncurrent version.
// It reports rows read per second.
func BenchmarkRun(b *testing.B) {
	const keys = 20000
	for _, engine := range benchStores {
		for _, expire := range []bool{false, true} {
			name := engine.name + "/scan"
			if expire {
				name = engine.name + "/expire"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				var rows int64
				var took time.Duration
				b.StopTimer()
				for range b.N {
					m := engine.open(b)
					d, err := local.Open(b.TempDir(), local.Options{})
					if err != nil {
						b.Fatal(err)
					}
					now := time.Now().Add(time.Hour)
					svc := object.New(m, d, object.Options{Now: func() time.Time { return now }})
					bkt := fill(b, svc, keys)
					if expire {
						if _, err := svc.SetLifecycle(ctx, bkt.Name, []meta.LifecycleRule{{Enabled: true, NoncurrentDays: 1}}); err != nil {
							b.Fatal(err)
						}
						now = now.AddDate(0, 0, 3)
					}
					b.StartTimer()
					start := time.Now()
					st, err := gc.Run(ctx, svc, gc.Options{Logger: quiet})
					took += time.Since(start)
					if err != nil || expire && st.NoncurrentExpired != keys {
						b.Fatalf("%+v, %v", st, err)
					}
					rows += st.Rows
					b.StopTimer()
					m.Close()
					d.Close()
				}
				b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
			})
		}
	}
}

// fill writes keys keys of two versions each, a thousand rows a commit.
func fill(b *testing.B, svc *object.Service, keys int) meta.Bucket {
	ctx := context.Background()
	if _, err := svc.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	bkt, err := svc.SetVersioning(ctx, "bench", meta.Enabled)
	if err != nil {
		b.Fatal(err)
	}
	var ms []meta.Mutation
	for i := range keys {
		for range 2 {
			v := &meta.Version{Key: fmt.Sprintf("k%08d", i), ID: meta.NewVersionID(svc.Now()), Size: 1, ETag: "e"}
			ms = append(ms, meta.PutMutation(bkt, v))
		}
		if len(ms) >= 1000 || i == keys-1 {
			if err := svc.Meta().Commit(ctx, bkt, ms...); err != nil {
				b.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	return bkt
}

// BenchmarkSweep measures what reclaiming garbage costs: a chunk store of
// old chunks nothing references is collected until empty, with the
// Service's clock a grace period further at every run (two runs: one
// condemns, one deletes). It reports chunks reclaimed per second of
// collection and the runs it took.
func BenchmarkSweep(b *testing.B) {
	const chunks = 10000
	for _, engine := range benchStores {
		b.Run(engine.name, func(b *testing.B) {
			ctx := context.Background()
			var reclaimed, runs int64
			var took time.Duration
			b.StopTimer()
			for range b.N {
				m := engine.open(b)
				dir := b.TempDir()
				d, err := local.Open(dir, local.Options{})
				if err != nil {
					b.Fatal(err)
				}
				for range chunks {
					if err := d.Put(ctx, data.NewChunkID(), []byte("garbage")); err != nil {
						b.Fatal(err)
					}
				}
				old := time.Now().Add(-2 * time.Hour)
				err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
					if err == nil && !e.IsDir() {
						err = os.Chtimes(p, old, old)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				svc := object.New(m, d, object.Options{Now: func() time.Time { return now }})
				for left := int64(chunks); left > 0; runs++ {
					b.StartTimer()
					start := time.Now()
					st, err := gc.Run(ctx, svc, gc.Options{Logger: quiet})
					took += time.Since(start)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					reclaimed += st.Reclaimed
					left -= st.Reclaimed
					now = now.Add(gc.DefaultGrace)
				}
				m.Close()
				d.Close()
			}
			b.ReportMetric(float64(reclaimed)/took.Seconds(), "chunks/s")
			b.ReportMetric(float64(runs)/float64(b.N), "runs")
		})
	}
}
