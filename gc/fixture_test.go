package gc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/cassandra"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// chunkSize keeps objects of a few KiB multi-chunk; bodies above
// inlineMax bytes get chunks at all.
const (
	chunkSize = 1024
	inlineMax = 16
)

// A clock is the Service's controllable clock. Chunk ages are the chunk
// files' modification times against the wall clock; backdate moves them.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	svc   *object.Service
	meta  meta.Store
	data  *local.Store
	dir   string
	clock *clock
	day0  time.Time         // 10:30 UTC on a day after every id issued so far
	names map[string]string // version id → the name a test gave it
}

// quiet keeps the collector's log lines out of test output.
var quiet = slog.New(slog.DiscardHandler)

// newFixture opens a Service on a fresh mem store, wrapped by wrap if
// given, and a local chunk store.
func newFixture(t *testing.T, wrap ...func(meta.Store) meta.Store) *fixture {
	t.Helper()
	// Ids carry the time they were issued and never run backwards in a
	// process: start after every id issued so far, at 10:30 UTC.
	last := meta.NewVersionID(time.Unix(0, 0)).Time()
	if now := time.Now().UTC(); now.After(last) {
		last = now
	}
	day0 := time.Date(last.Year(), last.Month(), last.Day()+1, 10, 30, 0, 0, time.UTC)
	dir := t.TempDir()
	d, err := local.Open(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var m meta.Store = mem.New()
	t.Cleanup(func() { d.Close(); m.Close() })
	for _, w := range wrap {
		m = w(m)
	}
	c := &clock{t: day0}
	return &fixture{
		t: t, ctx: t.Context(), meta: m, data: d, dir: dir, clock: c, day0: day0,
		svc:   object.New(m, d, object.Options{Now: c.Now, ChunkSize: chunkSize, InlineMax: inlineMax}),
		names: map[string]string{},
	}
}

// onEachStore runs test on mem, on bolt and, when STRATAFS_CASSANDRA is
// set, on Cassandra (a fresh keyspace, dropped afterwards): store, given
// to newFixture, puts the store in place of mem.
func onEachStore(t *testing.T, test func(t *testing.T, store ...func(meta.Store) meta.Store)) {
	t.Run("mem", func(t *testing.T) { test(t) })
	t.Run("bolt", func(t *testing.T) {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "meta.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		test(t, func(meta.Store) meta.Store { return s })
	})
	t.Run("cassandra", func(t *testing.T) {
		hosts := os.Getenv("STRATAFS_CASSANDRA")
		if hosts == "" {
			t.Skip("SKIPPING: set STRATAFS_CASSANDRA=host:port to run the collector against Cassandra")
		}
		keyspace := "stratafs_gc_" + strings.ToLower(rand.Text()[:8])
		s, err := cassandra.Open(t.Context(), strings.Split(hosts, ","), keyspace, cassandra.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.Close()
			if cs, err := gocql.NewCluster(strings.Split(hosts, ",")...).CreateSession(); err == nil {
				cs.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
				cs.Close()
			}
		})
		test(t, func(meta.Store) meta.Store { return s })
	})
}

// at sets the clock to day0 plus days, and optionally hours and minutes.
func (f *fixture) at(days int, hm ...int) time.Time {
	t := f.day0.AddDate(0, 0, days)
	for i, unit := range []time.Duration{time.Hour, time.Minute}[:len(hm)] {
		t = t.Add(time.Duration(hm[i]) * unit)
	}
	f.clock.set(t)
	return t
}

func (f *fixture) bucket(name string, v meta.Versioning, rules ...meta.LifecycleRule) {
	f.t.Helper()
	if _, err := f.svc.CreateBucket(f.ctx, name, ""); err != nil {
		f.t.Fatal(err)
	}
	if v != meta.Unversioned {
		if _, err := f.svc.SetVersioning(f.ctx, name, v); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := f.svc.SetLifecycle(f.ctx, name, rules); err != nil {
		f.t.Fatal(err)
	}
}

func body(name string) []byte {
	return bytes.Repeat([]byte(name+"."), 3*chunkSize/len(name)) // three chunks
}

// put writes key in bucket with a body derived from name, and names the
// version name.
func (f *fixture) put(bucket, key, name string) *meta.Version {
	f.t.Helper()
	b := body(name)
	v, err := f.svc.Put(f.ctx, bucket, key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))})
	if err != nil {
		f.t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	f.names[v.ID.String()] = name
	return v
}

// del deletes key, naming the marker written (if any) name.
func (f *fixture) del(bucket, key, name string) {
	f.t.Helper()
	res, err := f.svc.Delete(f.ctx, bucket, key, object.DeleteOptions{})
	if err != nil {
		f.t.Fatalf("delete %s/%s: %v", bucket, key, err)
	}
	if res.DeleteMarker {
		v, err := f.svc.Head(f.ctx, bucket, key, "")
		if v == nil {
			f.t.Fatalf("head of deleted %s/%s: %v", bucket, key, err)
		}
		f.names[v.ID.String()] = name
	}
}

// rows describes every row of bucket, in listing order: key=name, with
// "marker" for delete markers the test did not write (the collector's).
func (f *fixture) rows(bucket string) string {
	f.t.Helper()
	var out []string
	o := meta.VersionListOptions{}
	for {
		page, err := f.svc.ListVersions(f.ctx, bucket, o)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, v := range page.Versions {
			name, ok := f.names[v.ID.String()]
			switch {
			case !ok && v.DeleteMarker:
				name = "marker"
			case !ok:
				name = "?"
			}
			out = append(out, v.Key+"="+name)
		}
		if !page.IsTruncated {
			return strings.Join(out, " ")
		}
		o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}

func (f *fixture) expectRows(bucket, want string) {
	f.t.Helper()
	if got := f.rows(bucket); got != want {
		f.t.Fatalf("rows of %s at %s:\n got %s\nwant %s", bucket, f.clock.Now().Format(time.RFC3339), got, want)
	}
}

// collect runs the collector, which must succeed.
func (f *fixture) collect(o gc.Options) *gc.Stats {
	f.t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	st, err := gc.Run(f.ctx, f.svc, o)
	if err != nil {
		f.t.Fatalf("gc at %s: %v", f.clock.Now().Format(time.RFC3339), err)
	}
	return st
}

// reclaim runs the collector twice, the grace period apart by the
// Service's clock: the first run condemns the chunks it finds
// unreferenced past the grace period, the second deletes them. It
// returns the second run's counts.
func (f *fixture) reclaim(o gc.Options) *gc.Stats {
	f.t.Helper()
	f.collect(o)
	grace := o.Grace
	if grace == 0 {
		grace = gc.DefaultGrace
	}
	f.clock.set(f.clock.Now().Add(grace))
	return f.collect(o)
}

// chunks returns the ids in the chunk store.
func (f *fixture) chunks() map[data.ChunkID]bool {
	f.t.Helper()
	ids := map[data.ChunkID]bool{}
	err := f.data.Walk(f.ctx, func(id data.ChunkID, _ int64, _ time.Time) error {
		ids[id] = true
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// backdate makes every chunk stored so far look written d ago.
func (f *fixture) backdate(d time.Duration) {
	f.t.Helper()
	if err := f.age(d); err != nil {
		f.t.Fatal(err)
	}
}

// age is backdate for a store in use: chunks may go meanwhile.
func (f *fixture) age(d time.Duration) error {
	old := time.Now().Add(-d)
	return filepath.WalkDir(filepath.Join(f.dir, "chunks"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			err = os.Chtimes(p, old, old)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// chunksOf returns the chunks a version's manifest names.
func chunksOf(t *testing.T, v *meta.Version) []data.ChunkID {
	t.Helper()
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return m.ChunkIDs()
}

// read returns the bytes of a version.
func (f *fixture) read(bucket, key, version string) ([]byte, error) {
	obj, err := f.svc.Get(f.ctx, bucket, key, version, 0, -1)
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	return io.ReadAll(obj.Body)
}

func (f *fixture) expectBody(bucket, key, version, name string) {
	f.t.Helper()
	b, err := f.read(bucket, key, version)
	if err != nil || !bytes.Equal(b, body(name)) {
		f.t.Fatalf("%s/%s@%s reads %d bytes, %v; want the body of %s", bucket, key, version, len(b), err, name)
	}
}

func (f *fixture) stats(st *gc.Stats) string {
	return fmt.Sprintf("current %d noncurrent %d markers %d aborted %d dropped %d condemned %d reclaimed %d",
		st.CurrentExpired, st.NoncurrentExpired, st.MarkersRemoved, st.UploadsAborted, st.UploadsDropped, st.Condemned, st.Reclaimed)
}
