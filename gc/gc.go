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
// Last, the sweep walks the chunk store and decides on every chunk that
// is not marked and was written before the run's start minus the grace
// period (default 1 h), so the chunks of a write still in flight, whose
// row has not committed, are never taken.
//
// # Resuming an interrupted run
//
// The scan applies retention and marks referenced chunks in one walk,
// bucket by bucket in name order, key by key. Every few seconds
// (checkpointEvery), and when a run stops short (its context ends, its
// lease is lost, the meta store fails), it saves the last key whose
// expiries it applied as a checkpoint in the meta store (meta.Checkpoints,
// name "gc"), where the collector of every process sharing the store
// finds it. The next run starts its walk after that key, goes on to the
// last bucket, wraps around to the first, and ends with the keys up to
// the checkpoint; a run whose walk got round removes the checkpoint.
// So the work of runs that keep being cut short (deploys, a stratafs gc
// stopped with Ctrl-C) goes round the whole store instead of redoing its
// first buckets each time.
//
// The checkpoint only decides where the walk begins: every run still
// reads every row, because the sweep may only take a chunk once every
// row has been marked in the filter, which cannot be saved half-built.
// The rows an interrupted run already went through cost the next one
// only their reading (about a million rows a second), as its retention
// finds nothing left to expire there. So a checkpoint of any age is safe
// to use, one of a bucket since deleted (its id is
// gone; a bucket created again under the name has another) is ignored,
// and one saved late by a collector that lost its lease costs nothing
// but the order. Retention is idempotent, so the keys a killed run
// walked after its last save (a few seconds' worth) are walked again
// harmlessly. The sweep restarts with the run too, and loses
// nothing by it: a chunk condemned by an interrupted run stays condemned
// in the ledger, and the next run that finds it unreferenced, a grace
// period later, deletes it.
//
// # Condemned, then executed
//
// A chunk found unreferenced is not deleted at once: it is condemned, in
// the meta store's ledger (meta.Ledger), since the instant the sweep
// began. A later run that finds it unreferenced again deletes it if it
// was condemned at least the grace period before that run's sweep, and
// drops its record; one that finds it referenced again (a copy, a
// rename, a draft of the mount that shares it committed) pardons it. The
// ledger is read a batch of swept chunks at a time and walked a page at a
// time after the sweep, so it costs no memory per chunk either. Because
// the ledger lives in the meta store, the guarantee holds whichever
// gateway's collector runs (they take turns under the lease): a chunk is
// deleted no sooner than the grace period after a run first found it
// unreferenced, so a reader on any gateway that opened a version keeps
// its chunks for at least the grace period after the version is removed.
// The gateways' clocks must agree to well within the grace period.
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
// 100,100. BenchmarkSweep, 10,000 old garbage chunks in a local store:
// reclaimed at 5,500 to 8,000 chunks/s of collection over the two runs
// the ledger takes, as fast as the one run that deleted them before it
// (4,100 to 7,300): unlinking files costs more than the ledger, whose
// writes go a thousand chunks per commit.
//
// # Writers during a run
//
// The walk is not a snapshot, and a rename can move a chunk's only
// reference behind the walk's position. Every commit of the process that
// runs the collector shows it the chunks it references first (see
// sweeper), so nothing this process writes can lose a chunk. Writers in
// other processes on a shared meta store are covered for fresh chunks by
// the grace period, and for shared ones by the ledger: a rename in
// another gateway that races the walk only gets its chunks condemned,
// and the next run, whose scan sees the renamed row, pardons them. What
// is left is a row of another process that shares a chunk condemned a
// grace period ago (a draft of a version removed that long before its
// commit) committing behind the walk of the run that executes it: fsck
// reports it.
//
// # Readers
//
// A version open for reading in the collector's process (an S3 GET
// streaming it, a file held open in the mount, a .snapshots view) keeps
// its chunks for as long as it stays open, even after its row is removed
// (an overwrite in an unversioned bucket, a DELETE by version id, an
// expiry): object.Service counts the open readers of every chunk
// (Service.Reading) and the sweep neither condemns nor deletes those
// chunks. Opening a version while a run is in progress shows its chunks
// to the run's guard first, so an open that comes after the sweep took
// them fails at once rather than mid-stream. A reader in another process
// has the grace period after the removal (see above).
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
	// Grace is how old an unreferenced chunk must be to be condemned,
	// and how long it must then stay condemned before a run deletes it
	// (DefaultGrace when 0): longer than any write takes between storing
	// its chunks and committing its row, and the time a reader in another
	// process has to finish a version removed under it.
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
	// Condemned counts the unreferenced chunks past the grace period that
	// this run condemned (meta.Ledger); Reclaimed those it deleted, which
	// a run at least the grace period before condemned; Pardoned the
	// condemned chunks found referenced again.
	Condemned      int64
	Reclaimed      int64
	ReclaimedBytes int64
	Pardoned       int64

	// ResumedBucket and ResumedKey are set when an interrupted run left a
	// checkpoint: the retention pass began after that key, and wrapped
	// around to the keys before it.
	ResumedBucket, ResumedKey string

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
	// checkpoint is set when the scan applies retention and saves where
	// it got to (checkpoint.go): done, the last key it finished, saved
	// at saved.
	checkpoint bool
	done       *meta.Checkpoint
	saved      time.Time
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
	r.checkpoint = retain && !r.o.DryRun
	start, after := 0, ""
	if r.checkpoint {
		start, after = r.resume(ctx, buckets)
	}
	pass := func(b meta.Bucket) *bucketPass {
		p := &bucketPass{r: r, b: b}
		if retain && (r.o.Bucket == "" || r.o.Bucket == b.Name) && len(b.Lifecycle) > 0 {
			p.policy = object.NewPolicy(b.Lifecycle, r.now)
		}
		return p
	}
	var passes []*bucketPass
	for i := range buckets {
		passes = append(passes, pass(buckets[(start+i)%len(buckets)]))
	}
	if after != "" {
		last := pass(buckets[start])
		passes[0].after, last.through = after, after
		passes = append(passes, last)
	}
	for _, p := range passes {
		if err := p.run(ctx); err != nil && !errors.Is(err, meta.ErrNoSuchBucket) {
			r.interrupted(ctx)
			return err
		}
	}
	r.completed(ctx)
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

// sweep walks the chunk store and decides on the unreferenced chunks
// older than the cutoff (sweeper.collect): it condemns them, or deletes
// those a run condemned a grace period ago; a dry run counts. orphan, if
// set, is told of every unreferenced chunk. Then it settles the ledger.
func (r *run) sweep(ctx context.Context, orphan func(Orphan)) error {
	// Taken after the scan: a chunk it found unreferenced was so by now.
	r.sw.since = r.svc.Now()
	r.sw.due = r.sw.since.Add(-r.o.Grace)
	var batch []chunk
	flush := func() error {
		gone, condemned, err := r.sw.collect(ctx, batch, r.o.DryRun)
		due := make(map[data.ChunkID]bool, len(gone))
		for _, c := range gone {
			r.st.Reclaimed++
			r.st.ReclaimedBytes += c.size
			due[c.id] = true
		}
		r.st.Condemned += int64(condemned)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		if orphan != nil {
			for _, c := range batch {
				orphan(Orphan{Chunk: c.id, Size: c.size, Modified: c.modified, Collectable: true, Due: due[c.id]})
			}
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
		if !modified.Before(r.cutoff) {
			if orphan != nil {
				orphan(Orphan{Chunk: id, Size: size, Modified: modified})
			}
			return nil
		}
		if batch = append(batch, chunk{id: id, size: size, modified: modified}); len(batch) == deleteBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil && !r.o.DryRun {
		if err = r.sw.flushLedger(ctx, true); err == nil {
			err = r.settle(ctx)
		}
	}
	r.report("sweep", "", "")
	if err != nil {
		return err
	}
	r.log.Info("collected", "chunks", r.st.Reclaimed, "bytes", r.st.ReclaimedBytes,
		"condemned", r.st.Condemned, "pardoned", r.st.Pardoned, "dry_run", r.o.DryRun)
	return nil
}

// settle goes through the ledger once the walk is over, a page at a time:
// it pardons the chunks found referenced again (a copy or an undelete
// shares them) and drops the records that are overdue, which the walk
// would have executed had their chunks been there and unused (the chunk
// went some other way, or a reader of this process holds it: it is
// condemned afresh when found unreferenced again).
func (r *run) settle(ctx context.Context) error {
	var after *[16]byte
	for {
		page, err := r.meta.ListCondemned(ctx, after, meta.MaxLedgerBatch)
		if err != nil {
			return fmt.Errorf("settle the ledger: %w", err)
		}
		var drop [][16]byte
		for _, c := range page {
			switch {
			case r.sw.referenced(c.Chunk):
				r.st.Pardoned++
				drop = append(drop, c.Chunk)
			case !c.Since.After(r.sw.due):
				drop = append(drop, c.Chunk)
			}
		}
		if len(drop) > 0 {
			if err := r.meta.Pardon(ctx, drop); err != nil {
				return fmt.Errorf("settle the ledger: %w", err)
			}
		}
		if len(page) < meta.MaxLedgerBatch {
			return nil
		}
		after = &page[len(page)-1].Chunk
	}
}

// An Orphan is a chunk that no row and no upload part references.
type Orphan struct {
	Chunk    data.ChunkID
	Size     int64
	Modified time.Time
	// Collectable is set when the chunk is older than the grace period:
	// a younger one may belong to a write whose row has not committed. A
	// collectable chunk is condemned, and deleted by a run the grace
	// period later.
	Collectable bool
	// Due is set when a run condemned the chunk at least the grace period
	// ago: this run deleted it (a dry run would have).
	Due bool
}
