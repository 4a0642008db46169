package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// CheckIndexes verifies that the C, N, M, S and H entries of bucket bid
// are exactly what its V rows imply: C holds the attributes of each key's
// first row unless that is a delete marker, N the id of each key's null
// row; each row that keeps its manifest apart reads it from its own M
// entry or from the one its S entry names, every M entry is read by some
// row, H counts the rows reading an M entry when they are not one; and
// nothing else.
func CheckIndexes(s meta.Store, bid uint64) error {
	return s.(*Store).e.View(context.Background(), func(tx Txn) error {
		wantC, wantN := map[string][]byte{}, map[string][]byte{}
		var apart []meta.RowRef
		seen := map[string]bool{}
		start, end := prefixRange(spaceVersion, bid, "")
		var err error
		if serr := tx.Scan(start, end, func(k, v []byte) bool {
			var key string
			var id meta.VersionID
			if _, key, id, err = decodeVersionKey(k); err != nil {
				return false
			}
			var row *meta.Version
			if row, err = unmarshalRow(meta.VersionAttrs(v), key, &id); err != nil {
				return false
			}
			if meta.IsApart(v) {
				apart = append(apart, meta.RowRef{Key: key, ID: id})
			}
			if !seen[key] && !row.DeleteMarker {
				wantC[key] = bytes.Clone(meta.VersionAttrs(v))
			}
			seen[key] = true
			if row.Null {
				if wantN[key] != nil {
					err = fmt.Errorf("key %q has two null rows", key)
					return false
				}
				wantN[key] = id[:]
			}
			return true
		}); serr != nil {
			return serr
		}
		if err != nil {
			return err
		}
		if err := checkSpace(tx, spaceLive, bid, wantC); err != nil {
			return err
		}
		if err := checkSpace(tx, spaceNull, bid, wantN); err != nil {
			return err
		}
		// readers counts the rows reading each M entry, by its key.
		readers, sharing := map[string]int64{}, map[string]bool{}
		for _, r := range apart {
			home, err := homeOf(tx, bid, r.Key, r.ID)
			if err != nil {
				return err
			}
			if home == nil {
				home = &r
			} else {
				sharing[string(rowKey(spaceShared, bid, r.Key, r.ID))] = true
				if h, err := homeOf(tx, bid, home.Key, home.ID); err != nil || h != nil {
					return fmt.Errorf("row %q@%s shares %q@%s, itself sharing (%v)", r.Key, r.ID, home.Key, home.ID, err)
				}
			}
			readers[string(manifestKey(bid, home.Key, home.ID))]++
		}
		n, err := eachEntry(tx, spaceShared, bid, func(k, _ []byte) error {
			if !sharing[string(k)] {
				return fmt.Errorf("shared entry %x belongs to no row kept apart", k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		many := 0
		for _, c := range readers {
			if c > 1 {
				many++
			}
		}
		m, err := eachEntry(tx, spaceHolders, bid, func(k, v []byte) error {
			_, key, id, err := decodeRowKey(k, spaceHolders)
			if err != nil {
				return err
			}
			want := readers[string(manifestKey(bid, key, id))]
			if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) != want || want < 2 {
				return fmt.Errorf("holder count %x of %q@%s, want %d rows (written when more than one)", v, key, id, want)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n != len(sharing) || m != many {
			return fmt.Errorf("%d shared entries and %d holder counts, want %d and %d", n, m, len(sharing), many)
		}
		n, err = eachEntry(tx, spaceManifest, bid, func(k, v []byte) error {
			if readers[string(k)] == 0 || len(v) <= manifestApart {
				return fmt.Errorf("manifest entry %x of %d bytes is read by no row kept apart", k, len(v))
			}
			return nil
		})
		if err == nil && n != len(readers) {
			err = fmt.Errorf("%d manifest entries, want %d", n, len(readers))
		}
		return err
	})
}

// checkSpace compares the entries of an index space with want.
func checkSpace(tx Txn, space byte, bid uint64, want map[string][]byte) error {
	n, err := eachEntry(tx, space, bid, func(k, v []byte) error {
		_, key, err := decodeKeyKey(k, space)
		if err == nil && !bytes.Equal(v, want[key]) {
			err = fmt.Errorf("index %c of key %q: %x, want %x", space, key, v, want[key])
		}
		return err
	})
	if err == nil && n != len(want) {
		err = fmt.Errorf("index %c has %d entries, want %d", space, n, len(want))
	}
	return err
}

// eachEntry calls fn with every entry of space in bucket bid, up to the
// first error, and returns how many it was called with.
func eachEntry(tx Txn, space byte, bid uint64, fn func(k, v []byte) error) (int, error) {
	start, end := prefixRange(space, bid, "")
	var err error
	n := 0
	if serr := tx.Scan(start, end, func(k, v []byte) bool {
		if err = fn(k, v); err != nil {
			return false
		}
		n++
		return true
	}); serr != nil {
		return n, serr
	}
	return n, err
}

// Entries counts the engine entries of bucket bid in each space of the
// bucket's records that holds any, by the space's letter.
func Entries(s meta.Store, bid uint64) (map[string]int, error) {
	n := map[string]int{}
	err := s.(*Store).e.View(context.Background(), func(tx Txn) error {
		for _, space := range bucketSpaces {
			start, end := prefixRange(space, bid, "")
			if err := tx.Scan(start, end, func(_, _ []byte) bool {
				n[string(space)]++
				return true
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// PutWhole writes v, the only row of its key, as stores wrote every row
// before manifests were kept apart: whole in its V entry.
func PutWhole(s meta.Store, bid uint64, v *meta.Version) error {
	row, err := meta.MarshalVersion(v)
	if err != nil {
		return err
	}
	return s.(*Store).e.Update(context.Background(), func(tx Txn) error {
		if err := tx.Set(versionKey(bid, v.Key, v.ID), row); err != nil {
			return err
		}
		return tx.Set(keyKey(spaceLive, bid, v.Key), meta.VersionAttrs(row))
	})
}
