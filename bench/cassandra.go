package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/cassandra"
)

// cassandraFigures measures the Cassandra meta store on the cluster that
// STRATAFS_CASSANDRA names (host:port[,…]; integration/cassandra.sh starts
// one), in a keyspace of its own that it drops afterwards: put, get and
// list rates, the tombstone-listing ratio, and what a delimiter listing
// of a directory with 1,000 sub-directories costs at 64 shards. The data
// sets are smaller than the embedded stores', as every write is a Paxos
// round.
func cassandraFigures(w *tabwriter.Writer) {
	addrs := os.Getenv("STRATAFS_CASSANDRA")
	if addrs == "" {
		fmt.Fprintln(w, "cassandra\t(not run: set STRATAFS_CASSANDRA, see integration/cassandra.sh)\t\t\t")
		return
	}
	hosts := strings.Split(addrs, ",")
	ctx := context.Background()
	tag := make([]byte, 4)
	rand.Read(tag)
	keyspace := "stratafs_bench_" + hex.EncodeToString(tag)
	defer dropKeyspace(hosts, keyspace)
	st, err := cassandra.Open(ctx, hosts, keyspace, cassandra.Options{})
	check(err)
	defer st.Close()

	puts, keys, live, files := 4000, 10000, 50, 10
	if *quick {
		puts, keys, live, files = 400, 2000, 10, 2
	}
	rep := reporter{w, "cassandra"}
	report, ratio := rep.figure, rep.ratio

	b := putGetFigures(ctx, rep, st, puts, 16)
	r := rate(puts/4, 1, func(i int) {
		_, err := meta.Latest(ctx, st, b, fmt.Sprintf("missing/k%07d", i))
		if !meta.IsNotFound(err) {
			check(err)
		}
	})
	report("meta point get of a missing key", r, "gets/s")

	clean := newBucket(ctx, st, "clean", meta.Enabled)
	loadKeys(ctx, st, clean, keys, func(i int) (string, int, bool) { return fmt.Sprintf("dir%03d/key%07d", i%100, i), 1, false })
	r, _ = listBest(ctx, st, clean)
	report(fmt.Sprintf("ListObjects, %d keys", keys), r, "entries/s")

	// Tombstones: `live` live keys among 100·live deleted keys with 10
	// versions each, against a clean bucket of `live` keys. There is no
	// live index: both lists are meta.LiveIter over the history.
	small := newBucket(ctx, st, "small", meta.Enabled)
	loadKeys(ctx, st, small, live, func(i int) (string, int, bool) { return fmt.Sprintf("k%07d", i*101), 1, false })
	dirty := newBucket(ctx, st, "dirty", meta.Enabled)
	loadKeys(ctx, st, dirty, 101*live, func(i int) (string, int, bool) {
		if i%101 == 0 {
			return fmt.Sprintf("k%07d", i), 1, false
		}
		return fmt.Sprintf("k%07d", i), 10, true
	})
	base, n1 := listBest(ctx, st, small)
	dirtyRate, n2 := listBest(ctx, st, dirty)
	if n1 != live || n2 != live {
		check(fmt.Errorf("tombstone listing saw %d and %d keys, want %d", n1, n2, live))
	}
	report(fmt.Sprintf("ListObjects, clean %d-key bucket", live), base, "entries/s")
	report(fmt.Sprintf("ListObjects, %d live among %d deleted×10 versions", live, 100*live), dirtyRate, "entries/s")
	ratio("tombstone listing time ÷ clean", base/dirtyRate)

	// A directory of 1,000 sub-directories: the listing skips past each
	// one in every shard instead of reading its keys.
	tree := newBucket(ctx, st, "tree", meta.Enabled)
	loadKeys(ctx, st, tree, 1000*files, func(i int) (string, int, bool) {
		return fmt.Sprintf("dir/sub%04d/file%03d", i/files, i%files), 1, false
	})
	flat := newBucket(ctx, st, "flat", meta.Enabled)
	loadKeys(ctx, st, flat, 1000, func(i int) (string, int, bool) { return fmt.Sprintf("dir/file%04d", i), 1, false })
	delim := func(b meta.Bucket) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			page, err := meta.List(ctx, st, b, meta.ListOptions{Prefix: "dir/", Delimiter: "/"})
			check(err)
			if n := len(page.Objects) + len(page.CommonPrefixes); n != 1000 || page.IsTruncated {
				check(fmt.Errorf("delimiter listing of dir/ saw %d entries, want 1000", n))
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	dt, ft := delim(tree), delim(flat)
	report(fmt.Sprintf("delimiter listing, 1000 sub-directories × %d keys, %d shards", files, tree.Shards), float64(dt.Microseconds())/1000, "ms")
	report("same directory with 1000 keys and no sub-directories", float64(ft.Microseconds())/1000, "ms")
	ratio("sub-directories ÷ plain keys", dt.Seconds()/ft.Seconds())
}

// loadKeys writes n keys into b from 16 writers, one commit per row (a
// commit's mutations are applied one after another on Cassandra, so
// concurrency is what loads fast). key(i) names the i-th key, how many
// versions it gets and whether a delete marker goes on top.
func loadKeys(ctx context.Context, s meta.Store, b meta.Bucket, n int, key func(i int) (string, int, bool)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				k, versions, deleted := key(i)
				for range versions {
					check(s.Commit(ctx, b, meta.PutMutation(b, row(k, time.Now()))))
				}
				if deleted {
					m, _ := meta.DeleteMutation(b, k, "", time.Now())
					check(s.Commit(ctx, b, m))
				}
			}
		})
	}
	wg.Wait()
}

// dropKeyspace removes the bench's keyspace.
func dropKeyspace(hosts []string, keyspace string) {
	s, err := gocql.NewCluster(hosts...).CreateSession()
	if err == nil {
		defer s.Close()
		err = s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: drop keyspace %s: %v\n", keyspace, err)
	}
}
