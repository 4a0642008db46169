package gc

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	bbolt "go.etcd.io/bbolt"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/cassandra"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// TestOrphans leaves rows and an upload under the id of a deleted bucket
// of a bolt store, as a write racing DeleteBucket can on TiKV or
// Cassandra.
func TestOrphans(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "meta.db")
	open := func() meta.Store {
		m, err := bolt.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	orphanRun(t, open(), func(m meta.Store, name string) meta.Store {
		m.Close()
		forgetBucket(t, dbPath, name)
		return open()
	})
}

// TestOrphansCassandra is TestOrphans on Cassandra, where the bucket
// record is deleted with CQL.
func TestOrphansCassandra(t *testing.T) {
	hosts := os.Getenv("STRATAFS_CASSANDRA")
	if hosts == "" {
		t.Skip("SKIPPING: set STRATAFS_CASSANDRA=host:port to run the collector against Cassandra")
	}
	keyspace := "stratafs_gc_" + strings.ToLower(rand.Text()[:8])
	m, err := cassandra.Open(t.Context(), strings.Split(hosts, ","), keyspace, cassandra.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gocql.NewCluster(strings.Split(hosts, ",")...).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
	orphanRun(t, m, func(m meta.Store, name string) meta.Store {
		if err := s.Query("DELETE FROM "+keyspace+".buckets WHERE ns = 'default' AND name = ? IF EXISTS", name).Exec(); err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// orphanRun writes two buckets into m, removes the record of one with
// forget (which returns the store to use from then on), and collects: a
// dry run finds the dead id and changes nothing; a run removes its
// records and sweeps their chunks, and the live bucket keeps its own.
func orphanRun(t *testing.T, m meta.Store, forget func(m meta.Store, name string) meta.Store) {
	ctx := t.Context()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	opts := object.Options{ChunkSize: 4 << 10, InlineMax: 1}
	svc := object.New(m, d, opts)
	body := strings.Repeat("x", 10<<10) // three chunks
	for _, b := range []string{"live", "dead"} {
		if _, err := svc.CreateBucket(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b/c"} {
			if _, err := svc.Put(ctx, b, k, strings.NewReader(body), object.PutOptions{Size: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dead, err := m.Bucket(ctx, "dead")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateUpload(ctx, dead, &meta.Upload{Key: "u", ID: meta.NewUploadID(time.Now()), Initiated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	m = forget(m, "dead")
	defer m.Close()
	svc = object.New(m, d, opts)
	chunks := countChunks(t, d)

	st, err := Run(ctx, svc, Options{DryRun: true, Grace: time.Nanosecond})
	if err != nil || st.OrphanBuckets < 1 || st.OrphanRecords != 0 {
		t.Fatalf("dry run: %+v, %v; want the orphan bucket found and nothing removed", st, err)
	}
	if n := countChunks(t, d); n != chunks {
		t.Fatalf("the dry run removed %d chunks", chunks-n)
	}
	st, err = Run(ctx, svc, Options{Grace: time.Nanosecond})
	if err != nil || st.OrphanBuckets < 1 || st.OrphanRecords == 0 || st.Condemned != int64(chunks/2) {
		t.Fatalf("run: %+v, %v; want the orphan bucket's records removed and its chunks condemned", st, err)
	}
	// The next run, more than the grace period later, takes the chunks.
	if st, err = Run(ctx, svc, Options{Grace: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if n := countChunks(t, d); n != chunks/2 || st.Reclaimed != int64(chunks/2) {
		t.Fatalf("%d of %d chunks left, %d reclaimed; want the orphan's half gone", n, chunks, st.Reclaimed)
	}
	orphans, err := m.OrphanBuckets(ctx)
	if err != nil || slices.ContainsFunc(orphans, func(b meta.Bucket) bool { return b.ID == dead.ID }) {
		t.Fatalf("after the run OrphanBuckets = %v, %v", orphans, err)
	}
	obj, err := svc.Get(ctx, "live", "b/c", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.ReadFrom(obj.Body)
	obj.Body.Close()
	if got.String() != body {
		t.Fatalf("the live bucket's b/c reads %d bytes", got.Len())
	}
}

// forgetBucket deletes the record of bucket name from a closed bolt meta
// store and nothing else. It knows package kv's encoding of the record's
// key: 'B', the name (which has no zero byte), 0 0.
func forgetBucket(t *testing.T, path, name string) {
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("stratafs")).Delete(append([]byte("B"+name), 0, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("stratafs")).Get(append([]byte("B"+name), 0, 0)) != nil {
			t.Fatal("the bucket record is still there")
		}
		return nil
	})
}

func countChunks(t *testing.T, d data.Store) int {
	n := 0
	if err := d.Walk(context.Background(), func(data.ChunkID, int64, time.Time) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
