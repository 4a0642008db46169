// Package mem is an in-process ordered-KV engine for the meta store: tests
// and ephemeral runs. Nothing is persisted.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// New returns an empty in-memory meta store.
func New() meta.Store { return kv.New(&engine{l: newList()}) }

// engine serializes writers against everyone: an Update holds the write
// lock from start to commit. That keeps Update atomic with an undo log
// instead of a write buffer: fn reads its own writes straight from the
// list, no reader can see them before fn returns, and a failed fn's writes
// are undone before the lock is released.
type engine struct {
	mu sync.RWMutex
	l  *list // nil once closed
}

var errClosed = fmt.Errorf("memory engine closed: %w", meta.ErrUnavailable)

func (e *engine) Update(ctx context.Context, fn func(kv.Txn) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.l == nil {
		return errClosed
	}
	t := &txn{l: e.l, write: true}
	committed := false
	defer func() {
		if !committed { // fn failed or panicked
			t.rollback()
		}
	}()
	err = fn(t)
	committed = err == nil
	return err
}

func (e *engine) View(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.l == nil {
		return errClosed
	}
	return fn(&txn{l: e.l})
}

func (e *engine) Close() error {
	e.mu.Lock()
	e.l = nil
	e.mu.Unlock()
	return nil
}

type txn struct {
	l     *list
	write bool
	undo  []undo
}

// undo restores one key to what it was before a write.
type undo struct {
	key, val []byte
	existed  bool
}

var errReadOnly = errors.New("write in a read-only transaction")

func (t *txn) Get(k []byte) ([]byte, error) {
	v, _ := t.l.get(k)
	return v, nil
}

func (t *txn) Set(k, v []byte) error {
	if !t.write {
		return errReadOnly
	}
	old, existed := t.l.set(k, v)
	t.undo = append(t.undo, undo{k, old, existed})
	return nil
}

func (t *txn) Delete(k []byte) error {
	if !t.write {
		return errReadOnly
	}
	if old, existed := t.l.del(k); existed {
		t.undo = append(t.undo, undo{k, old, true})
	}
	return nil
}

func (t *txn) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	for n := t.l.seek(start); n != nil && bytes.Compare(n.key, end) < 0; n = n.next[0] {
		if !fn(n.key, n.val) {
			break
		}
	}
	return nil
}

// rollback undoes the transaction's writes, newest first.
func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		if u.existed {
			t.l.set(u.key, u.val)
		} else {
			t.l.del(u.key)
		}
	}
}
