package kv

import (
	"encoding/binary"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// manifestApart is the length past which a row's manifest is kept in an
// M entry of its own. A small file's bytes (up to 4 KiB) are most of its
// row: kept in it, they made bbolt's leaves hold one or two rows each, so
// that a delete marker or a rename rewrote the old row's 8 KiB leaf and
// its bytes again. Apart, a row is a hundred-odd bytes and its key's rows
// share a page. Measured on 2026-12-04 (3 alternating runs each): a mount
// rename of a 4 KiB file (BenchmarkMountRename) 6 % less CPU and 28 %
// less garbage; S3 4 KiB PUT and GET 0–10 % more server CPU (one more
// entry to write or read), 2–4 % fewer objects/s. A row that shares
// another's manifest kept apart shares its M entry (see shared): a rename
// of a 4 KiB file then writes no bytes of it, and BenchmarkRenamePrepared
// took 36–41 µs of CPU and 13.6 KB per rename instead of 51–55 µs and
// 23.4 KB (3 alternating runs each, 2026-12-04).
const manifestApart = 512

// An encoded row, as V and M keep it: man is nil unless the manifest is
// kept apart in an entry of the row's own; home is set instead when the
// row shares another row's (see shared).
type encoded struct {
	row, man []byte
	home     *meta.RowRef
}

func encode(v *meta.Version) (encoded, error) {
	if len(v.Manifest) <= manifestApart {
		row, err := meta.MarshalVersion(v)
		return encoded{row: row}, err
	}
	row, err := meta.MarshalVersionApart(v)
	return encoded{row: row, man: v.Manifest}, err
}

// Several rows may read one M entry: a rename or a chmod in the mount
// writes a row with the bytes of another (meta.Version.ManifestOf), and
// a small file's bytes are most of what it would copy. The entry stays
// under the row that wrote it (its home), and
//
//	S bid key id → key|id: the home whose M entry the row (key, id) reads
//	H bid key id → the number of rows that read the M entry of the home
//	               (key, id), 8 bytes big-endian; absent means one
//
// A row that shares names the home itself, never another sharer, so a
// read follows at most one S entry. When a row goes (see release), its
// home's count drops; the M entry goes when no row reads it, which may be
// after its own row has gone. Every share and every release of a home
// writes its H entry, even when the count it writes is the one it read:
// under snapshot isolation (TiKV) only write-write conflicts are caught,
// and H is the entry that a share and the removal of the last row reading
// the home, racing, both write; one of them then fails and runs again.

// manifestOf returns the manifest kept apart of row, the stored row (key,
// id): its own M entry or its home's; nil if row holds its own.
func manifestOf(tx Txn, bid uint64, key string, id meta.VersionID, row []byte) ([]byte, error) {
	if !meta.IsApart(row) {
		return nil, nil
	}
	_, man, err := homeManifest(tx, bid, key, id)
	return man, err
}

// homeManifest returns the home of the row (key, id), which keeps its
// manifest apart, and the home's M entry: the row's own, read first (most
// rows are their own home), or the one its S entry names.
func homeManifest(tx Txn, bid uint64, key string, id meta.VersionID) (*meta.RowRef, []byte, error) {
	man, err := tx.Get(manifestKey(bid, key, id))
	if err != nil || man != nil {
		return &meta.RowRef{Key: key, ID: id}, man, err
	}
	home, err := homeOf(tx, bid, key, id)
	if err == nil && home != nil {
		man, err = tx.Get(manifestKey(bid, home.Key, home.ID))
	}
	if err == nil && man == nil {
		err = fmt.Errorf("%w: row %q@%s has no manifest", meta.ErrCorrupt, key, id)
	}
	return home, man, err
}

// homeOf returns the home the row (key, id) shares, from its S entry; nil
// if it has none.
func homeOf(tx Txn, bid uint64, key string, id meta.VersionID) (*meta.RowRef, error) {
	v, err := tx.Get(rowKey(spaceShared, bid, key, id))
	if err != nil || v == nil {
		return nil, err
	}
	hkey, rest, err := readString(v)
	if err == nil && len(rest) != idLen {
		err = fmt.Errorf("%w: version id of %d bytes", errKey, len(rest))
	}
	if err != nil {
		return nil, fmt.Errorf("shared entry of %q@%s: %w", key, id, err)
	}
	return &meta.RowRef{Key: hkey, ID: meta.VersionID(rest)}, nil
}

// shared returns p, a row whose ManifestOf names another, with that
// row's manifest, and encoded. A manifest kept apart is not copied: p
// gets an S entry naming the M entry's home, whose count it raises at
// once, so that a removal later in the same transaction (a chmod that
// replaces the row it shares) keeps the entry. A manifest kept in its
// row is copied with it.
func shared(tx Txn, bid uint64, p *meta.Version) (*meta.Version, encoded, error) {
	ref := p.ManifestOf
	row, err := tx.Get(versionKey(bid, ref.Key, ref.ID))
	if err != nil {
		return nil, encoded{}, err
	}
	var origin *meta.Version
	var home *meta.RowRef
	switch {
	case row == nil: // Sharing says why that fails
	case meta.IsApart(row): // a row with a manifest apart is no delete marker
		var man []byte
		if home, man, err = homeManifest(tx, bid, ref.Key, ref.ID); err != nil {
			return nil, encoded{}, err
		}
		// Read for its length only: the row is marked as keeping it apart.
		origin = &meta.Version{Manifest: man}
	default:
		if origin, err = unmarshalRow(row, ref.Key, &ref.ID); err != nil {
			return nil, encoded{}, err
		}
	}
	v, err := p.Sharing(origin)
	if err != nil {
		return nil, encoded{}, err
	}
	if home == nil {
		data, err := encode(v)
		return v, data, err
	}
	data := encoded{home: home}
	if data.row, err = meta.MarshalVersionApart(v); err != nil {
		return nil, encoded{}, err
	}
	v.Manifest = nil // the engine's memory, valid in this transaction only
	return v, data, hold(tx, bid, home, +1)
}

// putManifest writes what row (key, id), encoded as data, keeps beside
// its V entry: its M entry, or its S entry naming the home it shares (the
// home's count is already raised).
func putManifest(tx Txn, bid uint64, key string, id meta.VersionID, data encoded) error {
	switch {
	case data.man != nil:
		return tx.Set(manifestKey(bid, key, id), data.man)
	case data.home != nil:
		return tx.Set(rowKey(spaceShared, bid, key, id), append(appendString(nil, data.home.Key), data.home.ID[:]...))
	}
	return nil
}

// release drops what the stored row (key, id), which goes, kept beside
// its V entry: its S entry, and its share of its home's M entry.
func release(tx Txn, bid uint64, key string, id meta.VersionID, row []byte) error {
	if !meta.IsApart(row) {
		return nil
	}
	home, err := homeOf(tx, bid, key, id)
	if err != nil {
		return err
	}
	if home == nil {
		home = &meta.RowRef{Key: key, ID: id}
	} else if err := tx.Delete(rowKey(spaceShared, bid, key, id)); err != nil {
		return err
	}
	return hold(tx, bid, home, -1)
}

// hold adds d to the number of rows that read home's M entry, and
// removes the entry once none does.
func hold(tx Txn, bid uint64, home *meta.RowRef, d int64) error {
	hk := rowKey(spaceHolders, bid, home.Key, home.ID)
	v, err := tx.Get(hk)
	if err != nil {
		return err
	}
	n := int64(1)
	if v != nil {
		if len(v) != 8 {
			return fmt.Errorf("%w: holder count of %q@%s is %d bytes", meta.ErrCorrupt, home.Key, home.ID, len(v))
		}
		n = int64(binary.BigEndian.Uint64(v))
	}
	switch n += d; {
	case n < 0:
		return fmt.Errorf("%w: holder count of %q@%s below zero", meta.ErrCorrupt, home.Key, home.ID)
	case n == 0:
		if err := tx.Delete(manifestKey(bid, home.Key, home.ID)); err != nil {
			return err
		}
		return tx.Delete(hk)
	case n == 1:
		return tx.Delete(hk)
	}
	return tx.Set(hk, binary.BigEndian.AppendUint64(nil, uint64(n)))
}
