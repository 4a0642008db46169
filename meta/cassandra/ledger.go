package cassandra

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

// The ledger (meta.Ledger) is the table condemned_chunks, partitioned by
// (ns, shard) where shard is the top four bits of the chunk id, and
// clustered by the id: sixteen partitions whose order, then the ids'
// within each, is id order. Chunk ids are random, so the partitions fill
// evenly. Its writes are plain (not LWT): one collector writes at a time,
// under its lease, and stamps them with its own clock, strictly
// increasing, so that a pardon is never ordered before the condemnation
// it undoes by the coordinators' clocks.
const ledgerShards = 16

func ledgerShard(id [16]byte) int { return int(id[0] >> 4) }

// ledgerClock issues the write timestamps of the ledger and of the
// checkpoints: microseconds, strictly increasing in the process.
var ledgerClock struct {
	sync.Mutex
	last int64
}

func ledgerTimestamp() int64 {
	ledgerClock.Lock()
	defer ledgerClock.Unlock()
	ledgerClock.last = max(ledgerClock.last+1, time.Now().UnixMicro())
	return ledgerClock.last
}

// byShard splits chunks by partition, each part in id order without
// duplicates.
func byShard(chunks [][16]byte) [ledgerShards][][]byte {
	ids := slices.Clone(chunks)
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	var parts [ledgerShards][][]byte
	for i, id := range slices.Compact(ids) {
		parts[ledgerShard(id)] = append(parts[ledgerShard(id)], ids[i][:])
	}
	return parts
}

// ledgerQuery returns a statement on the ledger table of the keyspace.
func (s *Store) ledgerQuery(format string) string {
	return fmt.Sprintf(format, s.q.keyspace+".condemned_chunks")
}

// Condemn writes the chunks' records, one batch per partition.
func (s *Store) Condemn(ctx context.Context, since time.Time, chunks [][16]byte) error {
	err := meta.ValidLedgerBatch(len(chunks))
	var data []byte
	if err == nil {
		data, err = meta.MarshalCondemned(since)
	}
	if err == nil {
		cql := s.ledgerQuery(`INSERT INTO %s (ns, shard, chunk, data) VALUES (?, ?, ?, ?)`)
		err = s.bounded(ctx, func(ctx context.Context) error {
			for shard, ids := range byShard(chunks) {
				if len(ids) == 0 {
					continue
				}
				b := s.session.Batch(gocql.UnloggedBatch).WithTimestamp(ledgerTimestamp())
				for _, id := range ids {
					b.Query(cql, s.ns, shard, id, data)
				}
				if err := b.ExecContext(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("condemn %d chunks: %w", len(chunks), err)
	}
	return nil
}

// Condemnations reads the chunks' records, one query per partition.
func (s *Store) Condemnations(ctx context.Context, chunks [][16]byte) ([]meta.Condemned, error) {
	err := meta.ValidLedgerBatch(len(chunks))
	var out []meta.Condemned
	if err == nil {
		cql := s.ledgerQuery(`SELECT chunk, data FROM %s WHERE ns = ? AND shard = ? AND chunk IN ?`)
		err = s.bounded(ctx, func(ctx context.Context) error {
			for shard, ids := range byShard(chunks) {
				if len(ids) == 0 {
					continue
				}
				var err error
				if out, err = s.scanLedger(s.session.Query(cql, s.ns, shard, ids).IterContext(ctx), out); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("condemnations of %d chunks: %w", len(chunks), err)
	}
	return out, nil
}

// ListCondemned reads the partitions in order from after's, each from
// the id after *after or its first.
func (s *Store) ListCondemned(ctx context.Context, after *[16]byte, limit int) ([]meta.Condemned, error) {
	if limit < 1 || limit > meta.MaxLedgerBatch {
		return nil, fmt.Errorf("list condemned chunks: limit %d, want 1 to %d: %w", limit, meta.MaxLedgerBatch, meta.ErrInvalidArgument)
	}
	shard, from := 0, []byte{}
	if after != nil {
		shard, from = ledgerShard(*after), after[:]
	}
	cql := s.ledgerQuery(`SELECT chunk, data FROM %s WHERE ns = ? AND shard = ? AND chunk > ? LIMIT ?`)
	var out []meta.Condemned
	err := s.bounded(ctx, func(ctx context.Context) error {
		for ; shard < ledgerShards && len(out) < limit; shard, from = shard+1, []byte{} {
			var err error
			it := s.session.Query(cql, s.ns, shard, from, limit-len(out)).IterContext(ctx)
			if out, err = s.scanLedger(it, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list condemned chunks: %w", err)
	}
	return out, nil
}

// scanLedger appends the records it yields to out.
func (s *Store) scanLedger(it *gocql.Iter, out []meta.Condemned) ([]meta.Condemned, error) {
	var chunk, data []byte
	for it.Scan(&chunk, &data) {
		c, err := meta.Condemned{}, fmt.Errorf("%w: a condemned chunk id of %d bytes", meta.ErrCorrupt, len(chunk))
		if len(chunk) == 16 {
			c, err = meta.UnmarshalCondemned([16]byte(chunk), data)
		}
		if err != nil {
			it.Close()
			return out, err
		}
		out = append(out, c)
	}
	return out, it.Close()
}

// Pardon deletes the chunks' records, one statement per partition.
func (s *Store) Pardon(ctx context.Context, chunks [][16]byte) error {
	err := meta.ValidLedgerBatch(len(chunks))
	if err == nil {
		cql := s.ledgerQuery(`DELETE FROM %s WHERE ns = ? AND shard = ? AND chunk IN ?`)
		err = s.bounded(ctx, func(ctx context.Context) error {
			for shard, ids := range byShard(chunks) {
				if len(ids) == 0 {
					continue
				}
				if err := s.session.Query(cql, s.ns, shard, ids).WithTimestamp(ledgerTimestamp()).ExecContext(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("pardon %d chunks: %w", len(chunks), err)
	}
	return nil
}
