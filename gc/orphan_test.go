package gc

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// TestOrphans leaves rows and an upload under the id of a deleted bucket,
// as a write racing DeleteBucket can on TiKV or Cassandra: a dry run
// finds the id and changes nothing; a run removes the records and sweeps
// their chunks, and the live bucket keeps its own.
func TestOrphans(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	d, err := local.Open(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dbPath := filepath.Join(dir, "meta.db")
	open := func() (meta.Store, *object.Service) {
		m, err := bolt.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		return m, object.New(m, d, object.Options{ChunkSize: 4 << 10, InlineMax: 1})
	}
	m, svc := open()
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
	m.Close()
	forgetBucket(t, dbPath, "dead")
	m, svc = open()
	defer m.Close()
	chunks := countChunks(t, d)

	st, err := Run(ctx, svc, Options{DryRun: true, Grace: time.Nanosecond})
	if err != nil || st.OrphanBuckets != 1 || st.OrphanRecords != 0 {
		t.Fatalf("dry run: %+v, %v; want one orphan bucket found and nothing removed", st, err)
	}
	if n := countChunks(t, d); n != chunks {
		t.Fatalf("the dry run removed %d chunks", chunks-n)
	}
	st, err = Run(ctx, svc, Options{Grace: time.Nanosecond})
	if err != nil || st.OrphanBuckets != 1 || st.OrphanRecords == 0 {
		t.Fatalf("run: %+v, %v; want the orphan bucket's records removed", st, err)
	}
	if n := countChunks(t, d); n != chunks/2 || st.Reclaimed != int64(chunks/2) {
		t.Fatalf("%d of %d chunks left, %d reclaimed; want the orphan's half gone", n, chunks, st.Reclaimed)
	}
	if orphans, err := m.OrphanBuckets(ctx); err != nil || len(orphans) != 0 {
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
