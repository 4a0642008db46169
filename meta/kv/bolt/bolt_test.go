package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) meta.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "meta.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := meta.NewBucket("photos", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	v := &meta.Version{Key: "cat.jpg", ID: meta.NewVersionID(time.Now()), Size: 3, Manifest: []byte{1}}
	if err := s.Commit(ctx, b, meta.PutMutation(b, v)); err != nil {
		t.Fatal(err)
	}
	if storedFreelist(t, path) {
		t.Fatal("a commit wrote the free-page list")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !storedFreelist(t, path) {
		t.Fatal("Close left no free-page list: the next Open must read the whole file")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	// Open writes no list of free pages. bbolt at its defaults, which a
	// file may have been written with (an older stratafs), finds the file
	// sound, and writes one, which Open then reads.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("bbolt's check of the file: %v", err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("written by bbolt's defaults"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Bucket(ctx, b.Name); err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("bucket after reopen = %+v, %v; want %+v", got, err, b)
	}
	got, err := meta.Latest(ctx, s, b, v.Key)
	if err != nil || got.ID != v.ID || got.Size != v.Size {
		t.Fatalf("latest after reopen = %+v, %v; want %+v", got, err, v)
	}
}

// storedFreelist reports whether the bbolt file at path names a stored
// free-page list.
func storedFreelist(t *testing.T, path string) bool {
	t.Helper()
	ok, err := bolt.FreelistStored(path)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// bbolt's flock belongs to the open file, so a second open in the
	// same process contends like another process would.
	if _, err := bolt.Open(path); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second open: %v, want in use", err)
	}
}

// TestGroupCommit runs concurrent commits, some of which fail or panic in
// their transaction: the others must commit, the failed ones leave nothing
// and their callers get their own error or panic.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := meta.NewBucket("group", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.Versioning = meta.Enabled
	if err := s.CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	errOdd := errors.New("odd")
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range 60 {
		wg.Go(func() {
			m := meta.PutMutation(b, &meta.Version{Key: "k", ID: meta.NewVersionID(time.Now()), Size: int64(i)})
			m.Check = func(*meta.Version) error {
				switch i % 3 {
				case 1:
					return errOdd
				case 2:
					panic(i)
				}
				return nil
			}
			p, err := catch(func() error { return s.Commit(ctx, b, m) })
			switch {
			case i%3 == 0 && p == nil && err == nil:
				ok.Add(1)
			case i%3 == 1 && p == nil && errors.Is(err, errOdd):
			case i%3 == 2 && p == i:
			default:
				t.Errorf("commit %d: %v, panic %v", i, err, p)
			}
		})
	}
	wg.Wait()
	n := 0
	it := s.Scan(ctx, b, meta.ScanOptions{})
	for it.Next() {
		if it.Version().Size%3 != 0 {
			t.Errorf("row of failed commit %d", it.Version().Size)
		}
		n++
	}
	if err := it.Err(); err != nil || n != 20 || ok.Load() != 20 {
		t.Fatalf("%d rows, %d commits succeeded, %v; want 20", n, ok.Load(), err)
	}
}

// catch calls f and returns what it panicked with, if anything.
func catch(f func() error) (p any, err error) {
	defer func() { p = recover() }()
	return nil, f()
}
