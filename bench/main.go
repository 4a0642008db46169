// Command bench prints stratafs's performance figures (`make bench`).
// Every ratio compares two figures measured in the same run on the same
// machine; nothing here is asserted, only reported.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pingcap/log"
	"go.uber.org/zap"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/meta/kv/tikv"
)

var (
	dir    = flag.String("dir", "", "scratch directory (default: a temporary one)")
	quick  = flag.Bool("quick", false, "smaller data sets, for a smoke run")
	only   = flag.String("only", "", "run one group of figures only: meta, cassandra, s3, fuse or memory")
	prof   = flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	block  = flag.String("blockprofile", "", "write a profile of where goroutines waited (channels, locks, select) to this file")
	mutex  = flag.String("mutexprofile", "", "write a profile of contended mutexes to this file")
	direct = flag.Bool("direct", false, "write chunk files with direct I/O (file:///path?direct=true) in the S3 and FUSE figures")
)

func main() {
	flag.Parse()
	// client-go logs at INFO, and warns on every commit the TiKV mock
	// cannot do in one phase: keep its errors only.
	log.SetLevel(zap.ErrorLevel)
	scratch := *dir
	if scratch == "" {
		d, err := os.MkdirTemp("", "stratafs-bench-")
		check(err)
		defer os.RemoveAll(d)
		scratch = d
	}
	defer profile(*prof, *block, *mutex)()
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tfigure\tvalue\tunit\t")
	groups := []struct {
		name string
		run  func()
	}{
		{"meta", func() {
			for _, b := range metaBackends(scratch) {
				metaFigures(tw, b)
			}
		}},
		{"cassandra", func() { cassandraFigures(tw) }},
		{"s3", func() { s3Figures(tw, scratch) }},
		{"fuse", func() { fuseFigures(tw, scratch) }},
		{"memory", func() { memoryFigures(tw, scratch) }},
	}
	known := false
	for _, g := range groups {
		if *only == "" || *only == g.name {
			known = true
			g.run()
		}
	}
	if !known {
		check(fmt.Errorf("-only %q: no such group of figures", *only))
	}
	check(tw.Flush())
}

// A backend is a meta store the meta figures run on.
type backend struct {
	name string
	open func(tag string) meta.Store
	// puts and sets divide the number of single-row commits and the sizes
	// of the listing data sets, for stores too slow to take the full ones
	// in a run of a few minutes; the labels of the figures give the sizes
	// used, and ratios compare figures of equal sizes.
	puts, sets int
	// batch is how many rows the listing data sets are loaded with per
	// commit.
	batch int
	// note, if set, is printed as the backend's first row.
	note string
}

func metaBackends(scratch string) []backend {
	return []backend{
		{name: "mem", open: func(string) meta.Store { return mem.New() }, puts: 1, sets: 1, batch: 1000},
		{name: "bolt", open: func(tag string) meta.Store {
			s, err := bolt.Open(filepath.Join(scratch, tag+".db"))
			check(err)
			return s
		}, puts: 4, sets: 1, batch: 1000}, // every commit is an fsync
		// The TiKV engine on client-go's mock cluster, the test double
		// `make test` runs it on: the whole client (transactions, 2PC,
		// region cache) with the servers simulated in this process and
		// the data in memory. Its rates say what the engine and client
		// cost, not what a cluster over a network does; the tombstone
		// ratio, which compares two listings of the same store, is the
		// figure to read.
		// It loads rows about ten times slower than bolt, hence the
		// quarter-size data sets, and a commit's reads cost a round trip
		// each through the client, slower the more the transaction holds
		// (a commit of 1,000 rows of the tombstone set took over 10 s),
		// hence the smaller commits.
		{name: "tikv (mock cluster, in-process)", open: func(tag string) meta.Store {
			s, err := tikv.NewMock(tag)
			check(err)
			return s
		}, puts: 4, sets: 4, batch: 100,
			note: "not a real cluster: client-go's in-process mock, data in memory, ¼-size data sets"},
	}
}

// profile starts the profiles whose files are named (CPU, block, mutex;
// "" for none) and returns the function that writes them.
func profile(cpu, block, mutex string) (stop func()) {
	var stops []func()
	if cpu != "" {
		f, err := os.Create(cpu)
		check(err)
		check(pprof.StartCPUProfile(f))
		stops = append(stops, func() {
			pprof.StopCPUProfile()
			check(f.Close())
		})
	}
	if block != "" {
		runtime.SetBlockProfileRate(1)
		stops = append(stops, func() { writeProfile("block", block) })
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(1)
		stops = append(stops, func() { writeProfile("mutex", mutex) })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// writeProfile writes the runtime's profile of that name to path.
func writeProfile(name, path string) {
	f, err := os.Create(path)
	check(err)
	check(pprof.Lookup(name).WriteTo(f, 0))
	check(f.Close())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// row builds a realistic small version row.
func row(key string, now time.Time) *meta.Version {
	return &meta.Version{
		Key: key, ID: meta.NewVersionID(now), Size: 4096,
		ETag:     "9e107d9d372bb6826bd81d3542a419d6",
		Content:  meta.Content{Type: "application/octet-stream"},
		Manifest: make([]byte, 40),
	}
}

func newBucket(ctx context.Context, s meta.Store, name string, v meta.Versioning) meta.Bucket {
	b, err := meta.NewBucket(name, "", time.Now())
	check(err)
	b.Versioning = v
	check(s.CreateBucket(ctx, b))
	return b
}

// discard reads r to its end in reads of len(buf) and returns how many
// bytes it read. (io.Copy into io.Discard would read 8 KiB at a time, in
// io.Discard's own ReadFrom, whatever buffer it is given.)
func discard(r io.Reader, buf []byte) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, buf)
}

// bestOf runs each of runs once per round, for rounds rounds, in an
// order that rotates from round to round, and returns each one's best
// round by rate. On a shared 2-core VM a burst of load from elsewhere, or
// memory the host has to hand the guest again, slows one round of one
// side by up to a half; the best of a few rounds compares the sides, not
// the moments they ran in.
func bestOf[R any](rounds int, rate func(R) float64, runs ...func(round int) R) []R {
	best := make([]R, len(runs))
	for r := range rounds {
		for k := range runs {
			i := (k + r) % len(runs)
			if res := runs[i](r); r == 0 || rate(res) > rate(best[i]) {
				best[i] = res
			}
		}
	}
	return best
}

// rate runs op n times over w workers and returns operations per second.
func rate(n, w int, op func(i int)) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	per := n / w
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g * per; i < (g+1)*per; i++ {
				op(i)
			}
		}(g)
	}
	wg.Wait()
	return float64(per*w) / time.Since(start).Seconds()
}

// load writes rows in large commits of the backend's batch, fast, for the
// listing figures.
func load(ctx context.Context, be backend, s meta.Store, b meta.Bucket, ms []meta.Mutation) {
	for len(ms) > 0 {
		n := min(len(ms), be.batch)
		check(s.Commit(ctx, b, ms[:n]...))
		ms = ms[n:]
	}
}

// listAll pages through a listing and returns entries/s and the count.
func listAll(ctx context.Context, s meta.Store, b meta.Bucket) (float64, int) {
	start, n := time.Now(), 0
	o := meta.ListOptions{MaxKeys: meta.MaxListKeys}
	for {
		page, err := meta.List(ctx, s, b, o)
		check(err)
		n += len(page.Objects) + len(page.CommonPrefixes)
		if !page.IsTruncated {
			return float64(n) / time.Since(start).Seconds(), n
		}
		o.After = page.Next
	}
}

// scanLive counts a bucket's live keys through a live scan or through
// meta.LiveIter over the history (the alternative the live index replaces).
func scanLive(ctx context.Context, s meta.Store, b meta.Bucket, index bool) (float64, int) {
	start, n := time.Now(), 0
	var it meta.Iter
	if index {
		it = s.Scan(ctx, b, meta.ScanOptions{Live: true})
	} else {
		it = meta.LiveIter(s.Scan(ctx, b, meta.ScanOptions{}))
	}
	for it.Next() {
		n++
	}
	check(it.Err())
	it.Close()
	return float64(n) / time.Since(start).Seconds(), n
}

func metaFigures(w *tabwriter.Writer, be backend) {
	ctx := context.Background()
	puts, keys, live := 20000, 100000, 1000
	if *quick {
		puts, keys, live = 2000, 10000, 100
	}
	puts, keys, live = puts/be.puts, keys/be.sets, live/be.sets
	rep := reporter{w, be.name}
	report, ratio := rep.figure, rep.ratio
	if be.note != "" {
		fmt.Fprintf(w, "%s\t(%s)\t\t\t\n", be.name, be.note)
	}

	s := be.open("puts")
	putGetFigures(ctx, rep, s, puts, 8)
	check(s.Close())

	// Listing: a clean bucket of `keys` keys.
	s = be.open("list")
	clean := newBucket(ctx, s, "clean", meta.Enabled)
	ms := make([]meta.Mutation, keys)
	for i := range ms {
		ms[i] = meta.PutMutation(clean, row(fmt.Sprintf("dir%03d/key%07d", i%100, i), time.Now()))
	}
	load(ctx, be, s, clean, ms)
	r, _ := listAll(ctx, s, clean)
	report(fmt.Sprintf("ListObjects, %d keys", keys), r, "entries/s")

	// Tombstones: `live` live keys among 100·live deleted keys with 10
	// versions each, against a clean bucket of `live` keys.
	small := newBucket(ctx, s, "small", meta.Enabled)
	ms = ms[:0]
	for i := 0; i < live; i++ {
		ms = append(ms, meta.PutMutation(small, row(fmt.Sprintf("k%07d", i*101), time.Now())))
	}
	load(ctx, be, s, small, ms)
	dirty := newBucket(ctx, s, "dirty", meta.Enabled)
	ms = ms[:0]
	for i := 0; i < 101*live; i++ {
		key := fmt.Sprintf("k%07d", i)
		if i%101 == 0 {
			ms = append(ms, meta.PutMutation(dirty, row(key, time.Now())))
			continue
		}
		for v := 0; v < 10; v++ {
			ms = append(ms, meta.PutMutation(dirty, row(key, time.Now())))
		}
		m, _ := meta.DeleteMutation(dirty, key, "", time.Now())
		ms = append(ms, m)
	}
	load(ctx, be, s, dirty, ms)
	base, n1 := listBest(ctx, s, small)
	withIndex, n2 := listBest(ctx, s, dirty)
	if n1 != live || n2 != live {
		check(fmt.Errorf("tombstone listing saw %d and %d keys, want %d", n1, n2, live))
	}
	scanClean, _ := scanLive(ctx, s, small, true)
	scanHist, _ := scanLive(ctx, s, dirty, false)
	report(fmt.Sprintf("ListObjects, clean %d-key bucket", live), base, "entries/s")
	report(fmt.Sprintf("ListObjects, %d live among %d deleted×10 versions", live, 100*live), withIndex, "entries/s")
	ratio("tombstone listing time ÷ clean (target ≤ 1.5)", base/withIndex)
	ratio("same without the live index (LiveIter over history)", scanClean/scanHist)
	// The collector ends each run with Compact, which on TiKV moves the
	// GC safe point so that the deleted live-index entries' history goes.
	if c, ok := s.(meta.Compactor); ok {
		check(c.Compact(ctx, time.Now()))
		after, _ := listBest(ctx, s, dirty)
		ratio("tombstone ratio after the collector's Compact (a no-op on mem and bolt)", base/after)
	}
	check(s.Close())
}

// reporter prints the figures of one backend as rows of the table.
type reporter struct {
	w       *tabwriter.Writer
	backend string
}

func (r reporter) figure(fig string, v float64, unit string) {
	fmt.Fprintf(r.w, "%s\t%s\t%.0f\t%s\t\n", r.backend, fig, v, unit)
}

func (r reporter) ratio(fig string, v float64) {
	fmt.Fprintf(r.w, "%s\t%s\t%.2f\t×\t\n", r.backend, fig, v)
}

// putGetFigures measures single-row commits from 1 and many writers, then
// point gets of the rows written, in a fresh versioned bucket of s. It
// returns the bucket, whose keys are "w1/k%07d".
func putGetFigures(ctx context.Context, rep reporter, s meta.Store, puts, many int) meta.Bucket {
	b := newBucket(ctx, s, "puts", meta.Enabled)
	for _, writers := range []int{1, many} {
		r := rate(puts, writers, func(i int) {
			v := row(fmt.Sprintf("w%d/k%07d", writers, i), time.Now())
			check(s.Commit(ctx, b, meta.PutMutation(b, v)))
		})
		rep.figure(fmt.Sprintf("meta put, %d writer(s)", writers), r, "puts/s")
	}
	r := rate(puts, 1, func(i int) {
		_, err := meta.Latest(ctx, s, b, fmt.Sprintf("w1/k%07d", i))
		check(err)
	})
	rep.figure("meta point get (latest)", r, "gets/s")
	return b
}

// listBest lists a bucket many times and keeps the best rate, so that
// neither a cold first pass nor a pause of the benchmark's own collector
// decides a ratio: a listing of a thousand keys takes a millisecond or
// two, and with the best of 3 the same bolt ratio read 0.88–8.85 in runs
// of one afternoon.
func listBest(ctx context.Context, s meta.Store, b meta.Bucket) (float64, int) {
	best, n := 0.0, 0
	for i := 0; i < 25; i++ {
		r, c := listAll(ctx, s, b)
		best, n = max(best, r), c
	}
	return best, n
}
