// Package gc is the collector: it applies each bucket's retention rules
// (meta.LifecycleRule, judged by object.Policy) and deletes the chunks no
// version row and no multipart upload references; and it is fsck, which
// checks that every row's chunks exist.
//
// # A run
//
// A run takes the collector's lease (meta.Leases, name "gc"), so that at
// most one collector works on a meta store, and renews it while it runs.
// It counts the chunk store's chunks to size its filter, then walks every
// bucket's rows a page at a time through the listing engine
// (meta.ListVersions), resuming each page from the last row's sort id, so
// memory does not grow with the bucket and rows it removes never make it
// skip or repeat others. Each key's rows stream through an
// object.KeyPass; the page's expiries are applied in one commit
// (object.Service.Expire), and the chunks of the rows that remain are
// marked referenced. Uploads follow: stale ones are aborted, completed
// ones' records dropped after a day, and the parts of the others marked.
// Last, the sweep walks the chunk store and deletes every chunk that is
// not marked and was written before the run's start minus the grace
// period (default 1 h), so the chunks of a write still in flight, whose
// row has not committed, are never taken.
//
// # Memory: a Bloom filter
//
// Marks go into a Bloom filter (filter.go) sized from the chunk count,
// plus an eighth for chunks written during the run: 14.4 bits per id at a
// false-positive rate of 10⁻³, where an exact set of 16-byte ids would
// take about 40 bytes per chunk in a Go map. A false positive keeps a
// garbage chunk for one run (the hash seeds change every run); it never
// deletes a referenced one. A second, quarter-size filter remembers what
// the sweep deleted (see sweeper). In all a run holds 2.5 bytes per
// chunk in the store: 25 MB for 10 million chunks, 250 MB for 100
// million, whatever the number of rows; rows are read a page (1000) at a
// time. An external sort of the referenced ids would be exact and need
// no such memory, but would write and merge every id on disk; at these
// sizes the filter is the better trade. Sizing it costs a walk of the
// chunk store before the scan, besides the sweep's.
//
// # Throughput
//
// BenchmarkRun, on a shared 2-core machine, 40,000 rows of 20,000 keys:
// about 0.9 (mem) to 1.4 (bolt) million rows/s when nothing expires, and
// 390,000 (mem) and 240,000 (bolt) rows/s read when every noncurrent row
// expires (a page's expiries share one commit). TestTombstones with
// -tombstones=100000: the 200,000 rows of 100,000 deleted keys removed
// in 1.5 s, after which an as-of listing reads 100 rows where it read
// 100,100.
//
// # Writers during a run
//
// The walk is not a snapshot, and a rename can move a chunk's only
// reference behind the walk's position. Every commit of the process that
// runs the collector shows it the chunks it references first (see
// sweeper), so nothing this process writes can lose a chunk. Writers in
// other processes on a shared meta store are covered for fresh chunks by
// the grace period only: run the collector in the one process that
// writes, or accept that a rename racing the walk in another gateway
// could lose the renamed object's chunks (fsck reports it).
//
// # Readers
//
// A version open for reading in the collector's process (an S3 GET
// streaming it, a file held open in the mount, a .snapshots view) keeps
// its chunks for as long as it stays open, even after its row is removed
// (an overwrite in an unversioned bucket, a DELETE by version id, an
// expiry): object.Service counts the open readers of every chunk
// (Service.Reading) and the sweep skips those chunks. Opening a version
// while a run is in progress shows its chunks to the run's guard first,
// so an open that comes after the sweep took them fails at once rather
// than mid-stream.
package gc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// Defaults of Options.
const (
	DefaultGrace            = time.Hour
	DefaultCompletedUploads = 24 * time.Hour
	DefaultLeaseTTL         = time.Minute
)

// LeaseName is the meta-store lease a collector holds while it runs.
const LeaseName = "gc"

// deleteBatch is how many chunks the sweep decides on, and deletes, at a
// time; commits wait for the batch in progress when they share one of its
// chunks.
const deleteBatch = 256

// Options tune a run. The zero value collects with the defaults.
type Options struct {
	// Bucket, if set, applies only this bucket's retention. Chunks are
	// swept whatever it says: buckets share them (copies), so all rows
	// are read to find which are referenced.
	Bucket string
	// DryRun changes nothing and reports what a run would do. It takes
	// no lease.
	DryRun bool
	// Grace is how old an unreferenced chunk must be to be deleted
	// (DefaultGrace when 0): longer than any write takes between storing
	// its chunks and committing its row.
	Grace time.Duration
	// CompletedUploads is how long the record of a completed multipart
	// upload is kept, so that a repeated Complete gets the same answer
	// (DefaultCompletedUploads when 0).
	CompletedUploads time.Duration
	// Holder names this collector in the lease (host:pid:random when
	// empty); LeaseTTL is the lease's time to live (DefaultLeaseTTL).
	Holder   string
	LeaseTTL time.Duration
	// Progress, if set, is called as the run advances, from its
	// goroutine: after every page of rows and every thousand chunks.
	Progress func(Progress)
	// Logger receives the decisions worth keeping (aborted uploads, the
	// sweep's totals) and what went wrong (slog.Default when nil).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.CompletedUploads == 0 {
		o.CompletedUploads = DefaultCompletedUploads
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:8])
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats count what a run (or fsck) read and did. In a dry run the
// counts of changes are those the run would have made.
type Stats struct {
	Buckets int
	Rows    int64 // version rows read
	Parts   int64 // upload parts read

	CurrentExpired    int64 // current versions expired (Expiration Days)
	NoncurrentExpired int64 // noncurrent versions and markers removed
	MarkersRemoved    int64 // delete markers removed as their key's only row
	UploadsAborted    int64 // incomplete uploads aborted
	UploadsDropped    int64 // records of completed uploads removed
	OrphanBuckets     int64 // deleted buckets' ids that still key records
	OrphanRecords     int64 // their records removed (partitions on Cassandra)

	// Unreadable counts rows and parts whose manifest cannot be decoded:
	// the chunks they name are unknown, so nothing is swept.
	Unreadable int64
	// Missing counts references to chunks that are absent or shorter
	// than the manifest says, in Damaged rows and parts (fsck).
	Missing int64
	Damaged int64

	Chunks            int64 // chunks in the chunk store
	ChunkBytes        int64
	Unreferenced      int64 // chunks nothing references, old or young
	UnreferencedBytes int64
	Reclaimed         int64 // unreferenced chunks past the grace period, deleted
	ReclaimedBytes    int64

	FilterBytes int // memory of the run's filters
	Elapsed     time.Duration
}

// Progress is where a run stands.
type Progress struct {
	Phase  string // "count", "scan" (rows and uploads), "orphans", "sweep"
	Bucket string // the bucket being scanned
	Key    string // the last key scanned
	Stats
}

// Run collects once: retention, uploads, then the chunk sweep. It returns
// the counts even when it fails part way. A collector elsewhere holding
// the lease is meta.ErrLeaseHeld.
func Run(ctx context.Context, svc *object.Service, o Options) (*Stats, error) {
	r := newRun(svc, o.withDefaults())
	err := r.locked(ctx, func(ctx context.Context) error {
		if err := r.scan(ctx, true); err != nil {
			return err
		}
		if err := r.orphans(ctx); err != nil {
			return err
		}
		if r.st.Unreadable > 0 {
			return fmt.Errorf("%d rows or parts have manifests that cannot be read, so no chunk was collected (run fsck): %w", r.st.Unreadable, meta.ErrCorrupt)
		}
		if err := r.sweep(ctx, nil); err != nil {
			return err
		}
		return r.compact(ctx)
	})
	return r.finish(), err
}

// run is one collection or check.
type run struct {
	svc   *object.Service
	meta  meta.Store
	o     Options
	log   *slog.Logger
	start time.Time
	// now is the instant retention is judged at (the Service's clock);
	// cutoff is when a chunk must have been written before to be
	// deleted, by the wall clock, which is what chunk stores stamp
	// chunks with.
	now    time.Time
	cutoff time.Time
	sw     *sweeper
	st     Stats
	// check, when set, probes every chunk a row or part references
	// (fsck) and reports what is missing.
	check func(Missing)
}

func newRun(svc *object.Service, o Options) *run {
	start := time.Now()
	return &run{
		svc:    svc,
		meta:   svc.Meta(),
		o:      o,
		log:    o.Logger.With("holder", o.Holder),
		start:  start,
		now:    svc.Now(),
		cutoff: start.Add(-o.Grace),
	}
}

func (r *run) finish() *Stats {
	r.st.Elapsed = time.Since(r.start)
	if r.sw != nil {
		r.st.FilterBytes = r.sw.refs.size() + r.sw.gone.size()
	}
	return &r.st
}

// locked runs fn under the collector's lease, unless the run changes
// nothing, with the sweeper guarding the Service's commits.
func (r *run) locked(ctx context.Context, fn func(context.Context) error) error {
	if !r.o.DryRun {
		lctx, release, err := holdLease(ctx, r.svc, r.o)
		if err != nil {
			return err
		}
		defer release()
		ctx = lctx
	}
	n, err := r.count(ctx)
	if err != nil {
		return err
	}
	r.sw = newSweeper(r.svc, n)
	if !r.o.DryRun {
		defer r.sw.guard(r.svc)()
	}
	if err := fn(ctx); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	return nil
}

func (r *run) report(phase, bucket, key string) {
	if r.o.Progress != nil {
		r.st.Elapsed = time.Since(r.start)
		r.o.Progress(Progress{Phase: phase, Bucket: bucket, Key: key, Stats: r.st})
	}
}

// count counts the chunk store's chunks, to size the filters.
func (r *run) count(ctx context.Context) (int, error) {
	n := 0
	err := r.svc.Data().Walk(ctx, func(data.ChunkID, int64, time.Time) error {
		if n++; n%10000 == 0 {
			r.report("count", "", "")
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count chunks: %w", err)
	}
	return n, nil
}

// scan walks every bucket's rows and uploads, applying retention when
// retain is set, and marks the chunks that stay referenced.
func (r *run) scan(ctx context.Context, retain bool) error {
	buckets, err := r.svc.Buckets(ctx)
	if err != nil {
		return err
	}
	found := r.o.Bucket == ""
	for _, b := range buckets {
		found = found || b.Name == r.o.Bucket
	}
	if !found {
		return fmt.Errorf("bucket %s: %w", r.o.Bucket, meta.ErrNoSuchBucket)
	}
	for _, b := range buckets {
		p := &bucketPass{r: r, b: b}
		if retain && (r.o.Bucket == "" || r.o.Bucket == b.Name) && len(b.Lifecycle) > 0 {
			p.policy = object.NewPolicy(b.Lifecycle, r.now)
		}
		if err := p.run(ctx); err != nil && !errors.Is(err, meta.ErrNoSuchBucket) {
			return err
		}
	}
	return nil
}

// manifest decodes a row's or part's manifest: nil when it has none, or
// when it cannot be read, which is counted and logged as what.
func (r *run) manifest(man []byte, what func() string) *data.Manifest {
	if len(man) == 0 {
		return nil
	}
	m, err := data.DecodeManifest(man)
	if err != nil {
		r.st.Unreadable++
		r.log.Error("unreadable manifest", "of", what(), "err", err)
		return nil
	}
	return m
}

// sweep walks the chunk store and deletes the unreferenced chunks older
// than the cutoff (in a dry run, counts them), telling orphan, if set,
// of every unreferenced chunk.
func (r *run) sweep(ctx context.Context, orphan func(Orphan)) error {
	var batch []chunk
	flush := func() error {
		gone := batch
		if !r.o.DryRun {
			var err error
			if gone, err = r.sw.collect(ctx, batch); err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
		}
		for _, c := range gone {
			r.st.Reclaimed++
			r.st.ReclaimedBytes += c.size
		}
		batch = batch[:0]
		return nil
	}
	err := r.svc.Data().Walk(ctx, func(id data.ChunkID, size int64, modified time.Time) error {
		if r.st.Chunks++; r.st.Chunks%1000 == 0 {
			r.report("sweep", "", "")
		}
		r.st.ChunkBytes += size
		if r.sw.referenced(id) {
			return nil
		}
		r.st.Unreferenced++
		r.st.UnreferencedBytes += size
		old := modified.Before(r.cutoff)
		if orphan != nil {
			orphan(Orphan{Chunk: id, Size: size, Modified: modified, Collectable: old})
		}
		if !old {
			return nil
		}
		if batch = append(batch, chunk{id: id, size: size}); len(batch) == deleteBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	r.report("sweep", "", "")
	if err != nil {
		return err
	}
	r.log.Info("collected", "chunks", r.st.Reclaimed, "bytes", r.st.ReclaimedBytes, "dry_run", r.o.DryRun)
	return nil
}

// An Orphan is a chunk that no row and no upload part references.
type Orphan struct {
	Chunk    data.ChunkID
	Size     int64
	Modified time.Time
	// Collectable is set when the chunk is older than the grace period:
	// a younger one may belong to a write whose row has not committed.
	Collectable bool
}
