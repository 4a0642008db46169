package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// CheckIndexes verifies that the C, N and M entries of bucket bid are
// exactly what its V rows imply: C holds the attributes of each key's
// first row unless that is a delete marker, N the id of each key's null
// row, M the manifest of each row that keeps it apart, and nothing else.
func CheckIndexes(s meta.Store, bid uint64) error {
	return s.(*Store).e.View(context.Background(), func(tx Txn) error {
		wantC, wantN, wantM := map[string][]byte{}, map[string][]byte{}, map[string]bool{}
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
				wantM[string(manifestKey(bid, key, id))] = true
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
		n, err := eachEntry(tx, spaceManifest, bid, func(k, v []byte) error {
			if !wantM[string(k)] || len(v) <= manifestApart {
				return fmt.Errorf("manifest entry %x of %d bytes belongs to no row kept apart", k, len(v))
			}
			return nil
		})
		if err == nil && n != len(wantM) {
			err = fmt.Errorf("%d manifest entries, want %d", n, len(wantM))
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
