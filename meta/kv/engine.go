package kv

import "context"

// An Engine is an ordered, transactional key-value store: all a backend of
// the ordered-KV family provides. Store builds the meta contract on it.
type Engine interface {
	// Update runs fn in a read-write transaction and commits what it wrote
	// if fn returns nil; otherwise none of it takes effect and fn's error
	// is returned. fn may run more than once (group commit, conflict
	// retries), each time in a fresh transaction, so it must have no
	// effect outside the transaction it is given.
	Update(ctx context.Context, fn func(Txn) error) error
	// View runs fn in a read-only transaction over a consistent snapshot.
	View(ctx context.Context, fn func(Txn) error) error
	Close() error
}

// A Txn reads and writes one transaction. Reads see the transaction's own
// writes. Byte slices it hands out are only valid until the function given
// to Update or View returns (those given to a Scan callback, until the
// callback returns): copy what you keep. Slices given to Set must not be
// modified afterwards.
type Txn interface {
	// Get returns k's value, or nil and no error when k is absent.
	Get(k []byte) ([]byte, error)
	Set(k, v []byte) error
	// Delete removes k; removing an absent key is not an error.
	Delete(k []byte) error
	// Scan calls fn with each key in [start, end) in ascending byte order
	// until fn returns false. fn must not write to the transaction.
	Scan(start, end []byte, fn func(k, v []byte) (more bool)) error
}
