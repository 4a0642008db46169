package kv

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// spaceCondemned keys the collector's ledger (meta.Ledger):
//
//	K chunk                → meta.MarshalCondemned: a condemned chunk's 16-byte id
//
// A ledger key is the space byte and the id, 17 bytes, so id order is key
// order.
const spaceCondemned byte = 'K'

func condemnedKey(id [16]byte) []byte {
	return append([]byte{spaceCondemned}, id[:]...)
}

func unmarshalCondemned(k, v []byte) (meta.Condemned, error) {
	if len(k) != 17 || k[0] != spaceCondemned {
		return meta.Condemned{}, fmt.Errorf("%w: %x in the ledger", errKey, k)
	}
	return meta.UnmarshalCondemned([16]byte(k[1:]), v)
}

// Condemn writes the chunks' records in one transaction.
func (s *Store) Condemn(ctx context.Context, since time.Time, chunks [][16]byte) error {
	err := meta.ValidLedgerBatch(len(chunks))
	var data []byte
	if err == nil {
		data, err = meta.MarshalCondemned(since)
	}
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			for _, id := range chunks {
				if err := tx.Set(condemnedKey(id), data); err != nil {
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

// Condemnations reads the chunks' records in one snapshot.
func (s *Store) Condemnations(ctx context.Context, chunks [][16]byte) ([]meta.Condemned, error) {
	if err := meta.ValidLedgerBatch(len(chunks)); err != nil {
		return nil, fmt.Errorf("condemnations: %w", err)
	}
	ids := slices.Clone(chunks)
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	var out []meta.Condemned
	err := s.e.View(ctx, func(tx Txn) error {
		out = out[:0]
		for _, id := range ids {
			k := condemnedKey(id)
			v, err := tx.Get(k)
			if err != nil {
				return err
			}
			if v == nil {
				continue
			}
			c, err := unmarshalCondemned(k, v)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("condemnations of %d chunks: %w", len(chunks), err)
	}
	return out, nil
}

// ListCondemned scans the ledger from the key after *after.
func (s *Store) ListCondemned(ctx context.Context, after *[16]byte, limit int) ([]meta.Condemned, error) {
	if limit < 1 || limit > meta.MaxLedgerBatch {
		return nil, fmt.Errorf("list condemned chunks: limit %d, want 1 to %d: %w", limit, meta.MaxLedgerBatch, meta.ErrInvalidArgument)
	}
	start := []byte{spaceCondemned}
	if after != nil {
		start = append(condemnedKey(*after), 0)
	}
	var out []meta.Condemned
	err := s.e.View(ctx, func(tx Txn) (err error) {
		out, err = collect(tx, start, []byte{spaceCondemned + 1}, limit, unmarshalCondemned, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list condemned chunks: %w", err)
	}
	return out, nil
}

// Pardon deletes the chunks' records in one transaction.
func (s *Store) Pardon(ctx context.Context, chunks [][16]byte) error {
	err := meta.ValidLedgerBatch(len(chunks))
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			for _, id := range chunks {
				if err := tx.Delete(condemnedKey(id)); err != nil {
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
