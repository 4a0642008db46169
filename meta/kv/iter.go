package kv

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/stratafs/stratafs/meta"
)

// maxBatch bounds the rows one read transaction fetches. An iterator never
// holds a transaction open between calls: it reads a batch, decodes it and
// lets go, so a slow consumer pins no snapshot (and no bbolt mmap).
// Batches start at one row and double: meta.Latest reads one row of a
// scan, listings quickly reach full batches.
const maxBatch = 128

// Scan returns an iterator over the bucket's rows; a live scan reads the C
// index, so deleted keys and old versions are never read.
func (s *Store) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	space := spaceVersion
	if o.Live {
		space = spaceLive
	}
	start, end := prefixRange(space, b.ID, o.Prefix)
	return &iter{ctx: ctx, e: s.e, b: b, live: o.Live, start: start, end: end, from: start, pos: start, batch: 1}
}

type iter struct {
	ctx        context.Context
	e          Engine
	b          meta.Bucket
	live       bool
	start, end []byte // the scan's range

	// buf holds the rows read in [from, pos); pos is where the next read
	// starts, and equals end once the range is exhausted.
	buf       []*meta.Version
	from, pos []byte
	i         int // next row of buf
	batch     int // rows the next read fetches
	cur       *meta.Version
	err       error
	closed    bool
}

func (it *iter) Next() bool {
	it.cur = nil
	if it.err != nil || it.closed {
		return false
	}
	if it.i == len(it.buf) {
		if bytes.Compare(it.pos, it.end) >= 0 {
			return false
		}
		it.fill()
		if it.i == len(it.buf) {
			return false
		}
	}
	it.cur = it.buf[it.i]
	it.i++
	return true
}

// fill reads the next batch from pos.
func (it *iter) fill() {
	it.from, it.i = it.pos, 0
	var last []byte
	err := it.e.View(it.ctx, func(tx Txn) error {
		it.buf, last = it.buf[:0], nil
		var derr error
		err := tx.Scan(it.from, it.end, func(k, v []byte) bool {
			var row *meta.Version
			if row, derr = it.decode(k, v); derr != nil {
				return false
			}
			it.buf = append(it.buf, row)
			if len(it.buf) < it.batch {
				return true
			}
			last = append(make([]byte, 0, len(k)+1), k...)
			return false
		})
		if err != nil {
			return err
		}
		return derr
	})
	if err != nil {
		it.buf, it.err = it.buf[:0], fmt.Errorf("scan %s: %w", it.b.Name, err)
		return
	}
	if last == nil {
		it.pos = it.end
	} else {
		it.pos = append(last, 0) // the least key after last
	}
	it.batch = min(2*it.batch, maxBatch)
}

// decode turns an entry of the scanned space into a row.
func (it *iter) decode(k, v []byte) (*meta.Version, error) {
	if it.live {
		_, key, err := decodeKeyKey(k, spaceLive)
		if err != nil {
			return nil, err
		}
		return unmarshalRow(v, key, nil)
	}
	_, key, id, err := decodeVersionKey(k)
	if err != nil {
		return nil, err
	}
	return unmarshalRow(v, key, &id)
}

func (it *iter) Version() *meta.Version { return it.cur }

// Seek repositions the iterator. A target inside what the current batch
// covers is found in the batch (a live view over a history scan seeks past
// every key's old rows, and those usually sit in the batch already);
// otherwise the batch is dropped and the next read starts at the target.
func (it *iter) Seek(key string, id meta.VersionID) {
	if it.err != nil || it.closed {
		return
	}
	it.cur = nil
	var t []byte
	if it.live {
		t = keyKey(spaceLive, it.b.ID, key)
	} else {
		t = versionKey(it.b.ID, key, id)
	}
	switch {
	case bytes.Compare(t, it.start) < 0:
		t = it.start
	case bytes.Compare(t, it.end) > 0:
		t = it.end
	}
	if bytes.Compare(t, it.from) >= 0 && bytes.Compare(t, it.pos) < 0 {
		it.i = sort.Search(len(it.buf), func(j int) bool {
			v := it.buf[j]
			if it.live || v.Key != key {
				return v.Key >= key
			}
			return v.ID.Compare(id) >= 0
		})
		return
	}
	it.buf, it.i, it.from, it.pos = it.buf[:0], 0, t, t
}

func (it *iter) Err() error { return it.err }

func (it *iter) Close() error {
	it.closed, it.buf, it.cur = true, nil, nil
	return nil
}
