// Package bolt is the embedded, persistent engine of the meta store (the
// default): one bbolt file, ACID, all records in one bbolt bucket under the
// key encoding of package kv.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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

// options are those of every Open. By default bbolt writes its whole
// list of free pages at every commit, and the list grows with the file's
// churn: with NoFreelistSync a commit writes only the pages it changed,
// and Open rebuilds the list by walking the tree instead (as etcd does;
// the hashmap list is the one that stays fast when it is long). Creating
// 10,000 4 KiB files and renaming them through the mount took 216 µs of
// the server's CPU per rename with the synced list and 172–180 without,
// and ran at 3,606–3,644 against 4,339–4,567 renames/s. Close stores the
// list, so only an Open after a crash rebuilds it. A file written either
// way opens either way.
var options = bbolt.Options{Timeout: lockTimeout, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}

// Open opens the meta store in the file at path, creating it (mode 0600)
// if needed.
func Open(path string) (meta.Store, error) {
	warm(path)
	o := options
	db, err := bbolt.Open(path, 0o600, &o)
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
	return kv.New(&engine{db: db}), nil
}

type engine struct {
	db *bbolt.DB

	mu      sync.Mutex
	queue   []*call // updates waiting for the next transaction
	leading bool    // a writer is committing
}

// A call is one Update waiting in the queue.
type call struct {
	fn   func(*bbolt.Tx) error
	done chan error // its result, or errLead
}

// errLead tells a queued call that it leads the next transaction.
var errLead = errors.New("lead the next transaction")

// panicked carries a panic out of the transaction that ran a call's fn, to
// be raised again in the goroutine that made the call.
type panicked struct{ v any }

func (p panicked) Error() string { return fmt.Sprint("panic in transaction: ", p.v) }

// Update commits fn together with whatever other updates are waiting:
// group commit, so concurrent writers share a transaction and its fsync.
// A writer arriving while no one commits leads: it takes the queue, runs
// every call in one bbolt transaction, delivers the results and hands the
// lead to the first call queued meanwhile. No one waits on a timer: alone,
// an update costs one transaction; under load, a transaction carries every
// update that arrived during the previous one. bbolt's own DB.Batch holds
// every batch for MaxBatchDelay (10 ms by default) before it starts: in
// BenchmarkCommit, run back to back with this, it managed about 80
// commits/s from one writer and 1,200/s from sixteen, against about 2,000
// and 7,000/s here. Shorter delays traded one number for the other.
func (e *engine) Update(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call{
		fn:   func(tx *bbolt.Tx) error { return fn(newTxn(tx)) },
		done: make(chan error, 1),
	}
	e.mu.Lock()
	e.queue = append(e.queue, c)
	lead := !e.leading
	e.leading = true
	e.mu.Unlock()
	if !lead {
		if err := <-c.done; err != errLead {
			return result(err)
		}
	}

	e.mu.Lock()
	batch := e.queue
	e.queue = nil
	e.mu.Unlock()
	e.commit(batch)
	e.mu.Lock()
	if len(e.queue) > 0 {
		e.queue[0].done <- errLead
	} else {
		e.leading = false
	}
	e.mu.Unlock()
	return result(<-c.done)
}

// result re-raises a panic of the caller's own fn.
func result(err error) error {
	if p, ok := err.(panicked); ok {
		panic(p.v)
	}
	return err
}

// commit runs the calls in one transaction and delivers their results. A
// call whose fn fails gets its error, having seen the writes of the calls
// before it (a valid order: they commit); the transaction is rolled back
// and the others run again without it.
func (e *engine) commit(batch []*call) {
	for len(batch) > 0 {
		failed := -1
		err := e.db.Update(func(tx *bbolt.Tx) error {
			for i, c := range batch {
				if err := protect(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range batch {
				c.done <- err
			}
			return
		}
		batch[failed].done <- err
		batch = append(batch[:failed], batch[failed+1:]...)
	}
}

// protect runs fn, turning a panic into a panicked error.
func protect(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked{v}
		}
	}()
	return fn(tx)
}

func (e *engine) View(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.db.View(func(tx *bbolt.Tx) error { return fn(newTxn(tx)) })
}

// Close stores the free-page list before it closes the file: commits do
// not write it (see options), and without it the next Open reads the whole
// file to rebuild it, 7.4 s for a 270 MB file not in the page cache
// against 0.05 s with it. Only a crash leaves an Open that work (see warm).
func (e *engine) Close() error {
	err := e.db.Update(func(*bbolt.Tx) error {
		// Read by this commit only: the writer lock is held.
		e.db.NoFreelistSync = false
		return nil
	})
	return errors.Join(err, e.db.Close())
}

type txn struct {
	b *bbolt.Bucket
	// c serves Get: bbolt's own Get makes a cursor and grows its stack
	// anew on every call. Seek repositions it whatever was changed since.
	c *bbolt.Cursor
}

func newTxn(tx *bbolt.Tx) *txn {
	b := tx.Bucket(records)
	return &txn{b: b, c: b.Cursor()}
}

func (t *txn) Get(k []byte) ([]byte, error) {
	if key, v := t.c.Seek(k); bytes.Equal(key, k) {
		return v, nil
	}
	return nil, nil
}
func (t *txn) Set(k, v []byte) error { return t.b.Put(k, v) }
func (t *txn) Delete(k []byte) error { return t.b.Delete(k) }

func (t *txn) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	c := t.b.Cursor()
	for k, v := c.Seek(start); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		if !fn(k, v) {
			break
		}
	}
	return nil
}
