// Package bolt is the embedded, persistent engine of the meta store (the
// default): one bbolt file, ACID, all records in one bbolt bucket under the
// key encoding of package kv.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// records is the one bbolt bucket that holds every key.
var records = []byte("stratafs")

// lockTimeout is how long Open waits for another process to let go of
// the file before giving up.
const lockTimeout = time.Second

// Open opens the meta store in the file at path, creating it (mode 0600)
// if needed.
func Open(path string) (meta.Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("meta store at %s is in use by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open meta store at %s: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(records)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open meta store at %s: %w", path, err)
	}
	return kv.New(engine{db}), nil
}

type engine struct{ db *bbolt.DB }

// Update runs fn through bbolt's Batch: concurrent commits share one
// transaction and so one fsync. Batch may run fn several times, which
// kv.Engine allows.
func (e engine) Update(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.db.Batch(func(tx *bbolt.Tx) error { return fn(txn{tx.Bucket(records)}) })
}

func (e engine) View(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.db.View(func(tx *bbolt.Tx) error { return fn(txn{tx.Bucket(records)}) })
}

func (e engine) Close() error { return e.db.Close() }

type txn struct{ b *bbolt.Bucket }

func (t txn) Get(k []byte) ([]byte, error) { return t.b.Get(k), nil }
func (t txn) Set(k, v []byte) error        { return t.b.Put(k, v) }
func (t txn) Delete(k []byte) error        { return t.b.Delete(k) }

func (t txn) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	c := t.b.Cursor()
	for k, v := c.Seek(start); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		if !fn(k, v) {
			break
		}
	}
	return nil
}
