package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/stratafs/stratafs/meta"
)

// maxBatch bounds the entries one read transaction fetches. An iterator
// never holds a transaction open between calls: it copies a batch of raw
// entries and lets go, so a slow consumer pins no snapshot (and no bbolt
// mmap). Batches start at one entry and double: meta.Latest reads one row
// of a scan, listings soon reach full batches. Entries are decoded only
// when Next reaches them, so rows a Seek skips cost a copy, not a decode.
const maxBatch = 128

// batches keeps the buffers of closed iterators. A listing page is an
// iterator of its own, and growing a fresh arena to a full batch of rows
// with inline bodies (128 × 4 KiB) by doubling cost a FUSE lookup walk
// about a third of its CPU in copying and zeroing.
var batches = sync.Pool{New: func() any { return new(batch) }}

// maxPooled is the largest arena Close returns to batches: a batch of
// rarely large rows is left to the collector rather than kept.
const maxPooled = 4 << 20

// A batch is the buffers of an iterator's batch.
type batch struct {
	arena []byte
	ents  []entry
}

// Scan returns an iterator over the bucket's rows; a live scan reads the C
// index, so deleted keys and old versions are never read. C holds
// attributes only: a live scan that wants whole rows reads each V row its
// C entry names.
func (s *Store) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	space := spaceVersion
	if o.Live {
		space = spaceLive
	}
	start, end := prefixRange(space, b.ID, o.Prefix)
	return &iter{ctx: ctx, e: s.e, b: b, live: o.Live, attrs: o.Attrs, start: start, end: end, from: start, pos: start, batch: 1}
}

type iter struct {
	ctx        context.Context
	e          Engine
	b          meta.Bucket
	live       bool
	attrs      bool   // copy the rows' attributes only (meta.VersionAttrs)
	start, end []byte // the scan's range

	// The batch: the entries read in [from, pos), copied into arena. pos
	// is where the next read starts; it equals end once the range is
	// exhausted.
	arena     []byte
	ents      []entry
	buf       *batch // holds arena and ents between iterators; nil until the first read
	from, pos []byte
	i         int // next entry
	batch     int // entries the next read fetches
	cur       *meta.Version
	err       error
	closed    bool
}

// entry locates one key, its value and, for a row whose manifest is kept
// apart, the manifest (empty otherwise) in the arena.
type entry struct{ k, v, man, end int }

func (it *iter) key(i int) []byte { return it.arena[it.ents[i].k:it.ents[i].v] }

func (it *iter) Next() bool {
	it.cur = nil
	if it.err != nil || it.closed {
		return false
	}
	if it.i == len(it.ents) {
		if bytes.Compare(it.pos, it.end) >= 0 {
			return false
		}
		if it.fill(); it.i == len(it.ents) {
			return false
		}
	}
	e := it.ents[it.i]
	it.i++
	v, err := it.decode(it.arena[e.k:e.v], it.arena[e.v:e.man], it.arena[e.man:e.end])
	if err != nil {
		it.err = fmt.Errorf("scan %s: %w", it.b.Name, err)
		return false
	}
	it.cur = v
	return true
}

// fill reads the next batch from pos.
func (it *iter) fill() {
	it.from, it.i = it.pos, 0
	if it.buf == nil {
		it.buf = batches.Get().(*batch)
		it.arena, it.ents = it.buf.arena, it.buf.ents
	}
	err := it.e.View(it.ctx, func(tx Txn) error {
		it.arena, it.ents = it.arena[:0], it.ents[:0]
		err := tx.Scan(it.from, it.end, func(k, v []byte) bool {
			if it.attrs {
				v = meta.VersionAttrs(v)
			}
			e := entry{k: len(it.arena), v: len(it.arena) + len(k)}
			it.arena = append(append(it.arena, k...), v...)
			e.man, e.end = len(it.arena), len(it.arena)
			it.ents = append(it.ents, e)
			return len(it.ents) < it.batch
		})
		if err == nil && !it.attrs {
			err = it.join(tx)
		}
		return err
	})
	switch {
	case err != nil:
		it.ents, it.err = it.ents[:0], fmt.Errorf("scan %s: %w", it.b.Name, err)
	case len(it.ents) < it.batch:
		it.pos = it.end
	default:
		last := it.key(len(it.ents) - 1)
		it.pos = append(append(make([]byte, 0, len(last)+1), last...), 0) // the least key after last
	}
	it.batch = min(2*it.batch, maxBatch)
}

// join makes the batch's entries, read in tx, whole rows: a live scan's C
// entries become the V rows they index, and a row whose manifest is kept
// apart gets it beside it. It runs after the scan, not inside it: an engine
// need not allow a Get while a Scan of the same transaction is running.
func (it *iter) join(tx Txn) error {
	if !it.live && !slices.ContainsFunc(it.ents, func(e entry) bool { return meta.IsApart(it.arena[e.v:e.end]) }) {
		return nil
	}
	var arena []byte
	for i, e := range it.ents {
		k, row := it.arena[e.k:e.v], it.arena[e.v:e.end]
		var (
			key string
			id  meta.VersionID
			err error
		)
		if it.live {
			if _, key, err = decodeKeyKey(k, spaceLive); err != nil {
				return err
			}
			head, err := unmarshalRow(row, key, nil)
			if err != nil {
				return err
			}
			id = head.ID
			if row, err = tx.Get(versionKey(it.b.ID, key, id)); err != nil {
				return err
			}
			if row == nil {
				return fmt.Errorf("%w: the live index names %q@%s, which has no row", meta.ErrCorrupt, key, id)
			}
		} else if _, key, id, err = decodeVersionKey(k); err != nil {
			return err
		}
		man, err := manifestOf(tx, it.b.ID, key, id, row)
		if err != nil {
			return err
		}
		ne := entry{k: len(arena), v: len(arena) + len(k)}
		arena = append(append(arena, k...), row...)
		ne.man = len(arena)
		arena = append(arena, man...)
		ne.end = len(arena)
		it.ents[i] = ne
	}
	it.arena = arena
	return nil
}

// decode turns an entry of the scanned space into a row; man is its
// manifest if kept apart.
func (it *iter) decode(k, v, man []byte) (*meta.Version, error) {
	if it.live {
		_, key, err := decodeKeyKey(k, spaceLive)
		if err != nil {
			return nil, err
		}
		return decodeRow(v, man, key, nil)
	}
	_, key, id, err := decodeVersionKey(k)
	if err != nil {
		return nil, err
	}
	return decodeRow(v, man, key, &id)
}

func (it *iter) Version() *meta.Version { return it.cur }

// Seek repositions the iterator. A target inside the range the batch
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
		it.i = sort.Search(len(it.ents), func(j int) bool { return bytes.Compare(it.key(j), t) >= 0 })
		return
	}
	it.ents, it.i, it.from, it.pos = it.ents[:0], 0, t, t
}

func (it *iter) Err() error { return it.err }

func (it *iter) Close() error {
	if it.buf != nil && cap(it.arena) <= maxPooled {
		it.buf.arena, it.buf.ents = it.arena[:0], it.ents[:0]
		batches.Put(it.buf)
	}
	it.closed, it.arena, it.ents, it.buf, it.cur = true, nil, nil, nil, nil
	return nil
}
