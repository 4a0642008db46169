package meta

import (
	"context"
	"fmt"
)

// Store is the meta contract every backend implements. It is deliberately
// narrow: backends provide atomic primitives and ordered iteration; the
// semantics (what a PUT or DELETE does in each versioning state, IsLatest,
// delimiters, pagination, as-of views) live once, in this package's listing
// engine and in package object. Every backend must pass meta/storetest.
type Store interface {
	// CreateBucket inserts b if no bucket of that name exists
	// (compare-and-set); otherwise it returns ErrBucketExists.
	CreateBucket(ctx context.Context, b Bucket) error
	// Bucket returns the named bucket or ErrNoSuchBucket.
	Bucket(ctx context.Context, name string) (Bucket, error)
	// Buckets returns every bucket, ordered by name.
	Buckets(ctx context.Context) ([]Bucket, error)
	// UpdateBucket applies fn to the named bucket atomically
	// (read-modify-write under compare-and-set) and returns the result. fn
	// may run more than once; it must not change Name or ID.
	UpdateBucket(ctx context.Context, name string, fn func(*Bucket) error) (Bucket, error)
	// DeleteBucket removes the named bucket if it holds no rows at all
	// (no versions, no delete markers) and no upload in progress;
	// otherwise ErrBucketNotEmpty. Records of completed uploads go with it.
	DeleteBucket(ctx context.Context, name string) error

	// Commit applies the mutations atomically: all or none. Backends
	// without multi-key transactions (Cassandra) run every Check first and
	// then apply the mutations one by one, in order, each atomic, so only
	// a crash can leave a prefix of them applied; they read the rows that
	// Puts share (Version.ManifestOf) with the checks, so such a row must
	// not be one the same commit writes. A PUT is exactly one
	// Commit. A bucket deleted meanwhile is ErrNoSuchBucket; a Put whose
	// key differs from its mutation's is ErrInvalidArgument.
	Commit(ctx context.Context, b Bucket, ms ...Mutation) error
	// Get returns the row (key, id) or ErrNoSuchVersion.
	Get(ctx context.Context, b Bucket, key string, id VersionID) (*Version, error)
	// GetNull returns the key's null row or ErrNoSuchVersion.
	GetNull(ctx context.Context, b Bucket, key string) (*Version, error)
	// Scan iterates over the bucket's rows in (key ASC, id ASC) order, which
	// is newest-first within a key.
	Scan(ctx context.Context, b Bucket, o ScanOptions) Iter

	Uploads
	AccessKeys
	Leases
	Checkpoints
	Orphans
	Ledger

	Close() error
}

// A Mutation is one atomic change to one key's rows.
type Mutation struct {
	Key string
	// Check, if set, runs inside the transaction with the key's current
	// first row, its attributes only (NoManifest; nil when the key has no
	// rows); a non-nil error aborts the whole commit and is returned. It
	// implements conditional writes (If-Match, If-None-Match) without a
	// race. It may run more than once (group commits, retried
	// transactions) and must have no side effects.
	Check func(head *Version) error
	// DropNull removes the key's existing null row, if any: a PUT or
	// DELETE in an unversioned or suspended bucket replaces it.
	DropNull bool
	// Delete, if non-zero, removes that row permanently; the next row of
	// the key becomes its latest. ErrNoSuchVersion if it does not exist.
	Delete VersionID
	// Put, if set, is written as a new row of Key (Put.Key must equal Key).
	// Its id must be new, and a null Put needs DropNull when the key has a
	// null row already: otherwise ErrInvalidArgument. A Put with
	// ManifestOf takes the manifest of the row it names as its mutation
	// applies, before the mutation removes any row (DropNull, Delete), so
	// it may share the row it replaces; ErrConflict if that row does not
	// exist.
	Put *Version
	// CompleteUpload, if set, names an upload of Key in state Completing:
	// in the same commit it becomes Completed and its parts are removed
	// (ErrNoSuchUpload if it is absent or in another state).
	CompleteUpload string
}

// Validate refuses a mutation no state of a store could accept; backends
// call it before they start a transaction.
func (m Mutation) Validate() error {
	if err := ValidKey(m.Key); err != nil {
		return err
	}
	if m.Put != nil && m.Put.Key != m.Key {
		return fmt.Errorf("put of key %q in a mutation of another key: %w", m.Put.Key, ErrInvalidArgument)
	}
	if p := m.Put; p != nil && (p.NoManifest != (p.ManifestOf != nil) || p.ManifestOf != nil && len(p.Manifest) > 0) {
		return fmt.Errorf("put of key %q: a row written without its manifest must name the row it shares: %w", m.Key, ErrInvalidArgument)
	}
	if m.Put != nil && !m.Delete.IsZero() && m.Put.ID == m.Delete {
		return fmt.Errorf("mutation deletes the row %s it puts: %w", m.Delete, ErrInvalidArgument)
	}
	if m.CompleteUpload != "" {
		return ValidUploadID(m.CompleteUpload)
	}
	return nil
}

// ScanOptions narrow a Scan.
type ScanOptions struct {
	// Prefix limits the scan to keys that start with it.
	Prefix string
	// Live yields only each key's first row, and only when it is not a
	// delete marker: the rows ListObjects shows. Backends that keep an
	// index of live heads use it so that deleted and old rows are never
	// read; others wrap their history scan with LiveIter.
	Live bool
	// Attrs says that the caller uses the rows' attributes only: a
	// backend may leave each row's manifest unread (see VersionAttrs).
	// The rows then carry whatever part of it was read: meta.List drops
	// it and marks them (Version.NoManifest).
	Attrs bool
}

// Iter walks rows in order. Next must be called before the first row.
// An Iter is not safe for concurrent use; the rows it returns belong to
// the caller.
type Iter interface {
	// Next advances to the next row and reports whether there is one.
	Next() bool
	// Version returns the current row.
	Version() *Version
	// Seek repositions the iterator so that the following Next returns the
	// first row at or after (key, id); the zero id means the key's first
	// row. Seeking to key+"\x00" skips the rest of key; seeking to
	// PrefixEnd(p) skips every key under p. A live scan ignores id.
	Seek(key string, id VersionID)
	// Err returns the error that ended the iteration, if any.
	Err() error
	Close() error
}

// PrefixEnd returns the smallest key greater than every key that starts
// with p, or "" when there is none (p is empty or all 0xff bytes).
func PrefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
