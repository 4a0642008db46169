package cassandra

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/stratafs/stratafs/meta"
)

// maxBatch bounds the records one cursor reads per query, and so, with
// every shard's buffer in memory at once, a scan's memory. A cursor's
// first read takes enough for its share of a listing page with room to
// spare (2·MaxListKeys/shards), each further read twice as many: a page
// then costs one round of concurrent queries, whatever the shard count.
// A probe reads one row: GET of a key's latest row reads just that.
const maxBatch = 128

// parallel bounds the queries one scan has in flight.
const parallel = 32

// A pos is a position in a partition's clustering order: a key and an id
// within it (a version id, or an upload id). A nil id is the key's
// first position.
type pos struct {
	key string
	id  []byte
}

func (p pos) compare(q pos) int {
	if c := strings.Compare(p.key, q.key); c != 0 {
		return c
	}
	return bytes.Compare(p.id, q.id)
}

// next returns the least position after p.
func (p pos) next() pos { return pos{p.key, append(slices.Clip(p.id), 0)} }

// An item is one record a cursor read: its position and stored form.
type item struct {
	pos
	data []byte
}

// A fetchFunc reads up to limit records of a shard, in order, from
// position from up to (not including) key end, "" for no end.
type fetchFunc func(ctx context.Context, shard int, from pos, end string, limit int) ([]item, error)

// merge walks the shards of a bucket through one cursor each, and yields
// their records in position order.
type merge struct {
	ctx    context.Context
	s      *Store
	fetch  fetchFunc
	shards uint32
	start  pos
	end    string
	curs   []*cursor
	h      cursorHeap // the cursors that can still yield
	err    error
}

// A cursor reads one shard. Its buffer holds every record of the shard
// in [from, to), so a Seek into that range needs no query.
type cursor struct {
	shard    int
	buf      []item
	i        int // next record in buf
	from, to pos
	done     bool // the shard has nothing at or after to: buf reaches its end
	batch    int  // records the next read asks for
	// probe marks the one shard that can hold the key a scan starts at,
	// or a Seek to a given row targets: it is read alone first, as that
	// key's rows come before every other shard's.
	probe bool
}

// head returns the cursor's next record, if it is in the buffer.
func (c *cursor) head() (item, bool) {
	if c.i < len(c.buf) {
		return c.buf[c.i], true
	}
	return item{}, false
}

// bound returns the least position the cursor can yield next.
func (c *cursor) bound() pos {
	if it, ok := c.head(); ok {
		return it.pos
	}
	return c.to
}

// exhausted reports whether the cursor can yield nothing more.
func (c *cursor) exhausted() bool { return c.done && c.i == len(c.buf) }

// newMerge starts a merge of b's shards at start, ending before key end.
func (s *Store) newMerge(ctx context.Context, shards uint32, fetch fetchFunc, start pos, end string) *merge {
	m := &merge{ctx: ctx, s: s, fetch: fetch, shards: shards, start: start, end: end}
	m.curs = make([]*cursor, shards)
	for i := range m.curs {
		m.curs[i] = &cursor{shard: i, batch: min(max(2*meta.MaxListKeys/int(shards), 1), maxBatch)}
	}
	m.seek(start, true)
	return m
}

// seek repositions every cursor at target or after, re-reading a shard
// only when its buffer does not cover target. A shard that cannot hold
// target's key starts after that key; with probe, the one that can is
// read alone first.
func (m *merge) seek(target pos, probe bool) {
	if target.compare(m.start) < 0 {
		target = m.start
	}
	beyond := m.end != "" && target.key >= m.end
	owner := shardOf(target.key, m.shards)
	m.h = m.h[:0]
	for _, c := range m.curs {
		t := target
		if c.shard != owner && t.key != "" {
			t = pos{key: t.key + "\x00"}
		}
		c.probe = false
		switch {
		case beyond:
			// Nothing lies in [end, …) for this scan.
			c.buf, c.i, c.from, c.to, c.done = nil, 0, pos{key: m.end}, pos{key: m.end}, true
		case t.compare(c.from) >= 0 && (c.done || t.compare(c.to) < 0):
			c.i = sortSearch(c.buf, t)
		default:
			c.buf, c.i, c.from, c.to, c.done = nil, 0, t, t, false
			c.probe = probe && c.shard == owner && t.key != ""
		}
		if !c.exhausted() {
			m.h = append(m.h, c)
		}
	}
	heap.Init(&m.h)
}

// sortSearch returns the index of the first item at or after t.
func sortSearch(items []item, t pos) int {
	i, _ := slices.BinarySearchFunc(items, t, func(it item, t pos) int { return it.compare(t) })
	return i
}

// next returns the next record in position order, or false at the end or
// on an error (m.err).
func (m *merge) next() (item, bool) {
	for m.err == nil && len(m.h) > 0 {
		top := m.h[0]
		if it, ok := top.head(); ok {
			top.i++
			if top.exhausted() {
				heap.Pop(&m.h)
			} else {
				heap.Fix(&m.h, 0)
			}
			return it, true
		}
		m.fill(top)
	}
	return item{}, false
}

// fill reads the cursors that may hold the next record: top, the
// least-bound cursor, alone if it probes; else, concurrently, every
// cursor without buffered records whose bound is not above the least
// buffered record, as any of them may hold a smaller one. In the same
// round it reads ahead for every cursor that has used up three quarters
// of its buffer: keys spread evenly over the shards, so their cursors
// run dry together, and one round of queries then refills them all
// instead of one query after another.
func (m *merge) fill(top *cursor) {
	group := []*cursor{top}
	if !top.probe {
		var least *pos
		for _, c := range m.h {
			if it, ok := c.head(); ok && (least == nil || it.compare(*least) < 0) {
				least = &it.pos
			}
		}
		group = group[:0]
		for _, c := range m.h {
			_, buffered := c.head()
			if !buffered && (least == nil || c.to.compare(*least) <= 0) ||
				buffered && !c.done && 4*(len(c.buf)-c.i) <= len(c.buf) {
				group = append(group, c)
			}
		}
	}
	ctx, cancel := m.s.bound(m.ctx)
	defer cancel()
	err := fanOut(ctx, len(group), func(ctx context.Context, i int) error {
		c := group[i]
		limit := c.batch
		if c.probe {
			limit = 1
		} else {
			c.batch = min(2*c.batch, maxBatch)
		}
		items, err := m.fetch(ctx, c.shard, c.to, m.end, limit)
		if err != nil {
			return err
		}
		// Keep what is left to read: the buffer then covers from its
		// first record on.
		left := c.buf[c.i:]
		if len(left) > 0 {
			c.from = left[0].pos
		} else {
			c.from = c.to
		}
		c.buf, c.i, c.probe = append(slices.Clip(left), items...), 0, false
		if len(items) < limit {
			c.done = true
		} else {
			c.to = items[len(items)-1].pos.next()
		}
		return nil
	})
	if err != nil {
		m.err = m.s.wrap(ctx, err)
		return
	}
	m.h = slices.DeleteFunc(m.h, (*cursor).exhausted)
	heap.Init(&m.h)
}

// fanOut runs fn(i) for i in [0, n), parallel at a time, and returns the
// first error; the calls still running then see their context end.
func fanOut(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// cursorHeap orders cursors by the least position each can yield next.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := h[i].bound().compare(h[j].bound()); c != 0 {
		return c < 0
	}
	// A buffered record goes before a bound it ties with: the unread
	// shard's records are all after it, as no two shards share a key.
	_, ok := h[i].head()
	return ok
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Scan returns an iterator over the bucket's rows; a Live scan is a
// history scan under meta.LiveIter, as there is no index of live heads.
func (s *Store) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	it := &rowIter{}
	n, err := shards(b)
	if err != nil {
		it.err = fmt.Errorf("scan %s: %w", b.Name, err)
	} else {
		it.b = b
		it.m = s.newMerge(ctx, n, s.fetcher(b.ID, s.q.scan, s.q.scanTo), pos{key: o.Prefix}, meta.PrefixEnd(o.Prefix))
	}
	if o.Live {
		return meta.LiveIter(it)
	}
	return it
}

// fetcher returns the fetchFunc of bucket bid's shards with the queries
// scan (taking shard, key, id and limit) and scanTo (the same with the
// end key before the limit).
func (s *Store) fetcher(bid uint64, scan, scanTo string) fetchFunc {
	return func(ctx context.Context, shard int, from pos, end string, limit int) ([]item, error) {
		q := s.session.Query(scan, int64(bid), shard, blob(from.key), blob(from.id), limit)
		if end != "" {
			q = s.session.Query(scanTo, int64(bid), shard, blob(from.key), blob(from.id), blob(end), limit)
		}
		return readItems(q.IterContext(ctx), limit)
	}
}

// readItems reads the (key, id, data) rows of it.
func readItems(it *gocql.Iter, limit int) ([]item, error) {
	items := make([]item, 0, limit)
	var key, id, data []byte
	for it.Scan(&key, &id, &data) {
		items = append(items, item{pos{string(key), id}, data})
		key, id, data = nil, nil, nil
	}
	return items, it.Close()
}

// blob returns s as a blob value: never nil, which the driver would
// send as null.
func blob[T string | []byte](s T) []byte {
	return append([]byte{}, s...)
}

// rowIter is a history scan over a merge of the bucket's shards.
type rowIter struct {
	b      meta.Bucket
	m      *merge
	cur    *meta.Version
	err    error
	closed bool
}

func (it *rowIter) Next() bool {
	it.cur = nil
	if it.err != nil || it.closed {
		return false
	}
	r, ok := it.m.next()
	if !ok {
		if it.m.err != nil {
			it.err = fmt.Errorf("scan %s: %w", it.b.Name, it.m.err)
		}
		return false
	}
	v, err := unmarshalRow(r.data, r.key, r.id)
	if err != nil {
		it.err = fmt.Errorf("scan %s: %w", it.b.Name, err)
		return false
	}
	it.cur = v
	return true
}

func (it *rowIter) Version() *meta.Version { return it.cur }

// Seek repositions the iterator. A seek to a given row probes the shard
// of its key first (a version marker resumes on it); a seek past a key
// or prefix reads every shard it moves at once.
func (it *rowIter) Seek(key string, id meta.VersionID) {
	if it.err != nil || it.closed {
		return
	}
	it.cur = nil
	t := pos{key: key}
	if !id.IsZero() {
		t.id = id[:]
	}
	it.m.seek(t, !id.IsZero())
}

func (it *rowIter) Err() error { return it.err }

func (it *rowIter) Close() error {
	it.closed, it.cur = true, nil
	if it.m != nil {
		it.m.curs, it.m.h = nil, nil
	}
	return nil
}

// unmarshalRow decodes a stored row and checks that it is the row of the
// key and id it was stored under.
func unmarshalRow(data []byte, key string, id []byte) (*meta.Version, error) {
	v, err := meta.UnmarshalVersion(data)
	if err != nil {
		return nil, err
	}
	if v.Key != key || !bytes.Equal(v.ID[:], id) {
		return nil, fmt.Errorf("%w: row %q@%s stored under %q@%x", meta.ErrCorrupt, v.Key, v.ID, key, id)
	}
	return v, nil
}
