package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// CheckIndexes verifies that the C and N indexes of bucket bid are exactly
// what its V rows imply: C holds the attributes of each key's first row
// unless that is a delete marker, N the id of each key's null row.
func CheckIndexes(s meta.Store, bid uint64) error {
	return s.(*Store).e.View(context.Background(), func(tx Txn) error {
		wantC, wantN := map[string][]byte{}, map[string][]byte{}
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
			if row, err = unmarshalRow(v, key, &id); err != nil {
				return false
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
		return checkSpace(tx, spaceNull, bid, wantN)
	})
}

// checkSpace compares the entries of an index space with want.
func checkSpace(tx Txn, space byte, bid uint64, want map[string][]byte) error {
	start, end := prefixRange(space, bid, "")
	var err error
	n := 0
	if serr := tx.Scan(start, end, func(k, v []byte) bool {
		var key string
		if _, key, err = decodeKeyKey(k, space); err != nil {
			return false
		}
		if !bytes.Equal(v, want[key]) {
			err = fmt.Errorf("index %c of key %q: %x, want %x", space, key, v, want[key])
			return false
		}
		n++
		return true
	}); serr != nil {
		return serr
	}
	if err == nil && n != len(want) {
		err = fmt.Errorf("index %c has %d entries, want %d", space, n, len(want))
	}
	return err
}

// Entries counts the engine entries of bucket bid in each space of the
// bucket's records that holds any, by the space's letter.
func Entries(s meta.Store, bid uint64) (map[string]int, error) {
	n := map[string]int{}
	err := s.(*Store).e.View(context.Background(), func(tx Txn) error {
		for _, space := range []byte{spaceVersion, spaceLive, spaceNull, spaceUpload, spacePart} {
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
