// Package tikv is the meta store engine on a TiKV cluster: package kv's
// Store, with its key encoding and values unchanged, over client-go's
// transactions, so that several stratafs processes can share one meta
// store.
//
// # Transactions
//
// Update runs an optimistic transaction: reads come from a snapshot at the
// transaction's start timestamp, writes stay in client memory, and commit
// runs two-phase commit (or one phase, or async commit, where the cluster
// allows). Two transactions that write a common key conflict at commit,
// and the later one fails; Update then runs fn again in a new transaction,
// after a random sleep that doubles with each attempt, at most attempts
// times. A transaction that never gets through fails with meta.ErrConflict.
// Optimistic beats pessimistic here: kv's transactions are short and touch
// a handful of keys, so conflicts are rare and cost one more round, while
// pessimistic locking would cost an RPC per key written and the Txn
// interface has no way to say which reads a write depends on.
//
// The isolation is snapshot isolation, as TiKV provides, where mem and
// bolt serialize transactions: only write-write conflicts are detected, so
// a transaction commits even if a key it only read was written meanwhile.
// Transactions of kv that must exclude each other have to write a common
// key.
//
// # Availability
//
// client-go retries region errors (leader changes, splits, busy stores)
// itself, with backoff budgets of 15 to 40 seconds. Every Update and View
// is bounded by the engine's timeout instead: when the cluster does not
// answer within it, the call fails with meta.ErrUnavailable (as does any
// error client-go gives up with), and the caller — an S3 request, a FUSE
// operation — fails cleanly instead of hanging. A commit whose outcome is
// unknown (the primary key's commit got no answer) fails the same way: it
// may have taken effect. Scans are the one gap: client-go's scanner sends
// its requests under a context of its own, so a scan stops retrying at the
// timeout but first waits for the request in flight, which on a network
// that drops packets silently can take until gRPC gives up on the
// connection (client-go's read timeout for scans is a minute).
//
// # Namespaces
//
// Every key is stored under a prefix followed by a zero byte, so that
// several stratafs instances, or tests, can share a cluster: no prefix's
// keys fall inside another's range, not even those of "a" and "ab".
package tikv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tikverr "github.com/tikv/client-go/v2/error"
	clientkv "github.com/tikv/client-go/v2/kv"
	"github.com/tikv/client-go/v2/oracle"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv"
	"github.com/tikv/client-go/v2/txnkv/transaction"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

const (
	// attempts bounds how often Update runs a transaction that keeps
	// meeting write conflicts.
	attempts = 10
	// Before its nth retry, Update sleeps a random duration below
	// backoffBase·2ⁿ⁻¹, capped at backoffCap ("full jitter"), so that
	// writers that collided spread out instead of colliding again. The
	// nine retries sleep about a second in all on average, two at most.
	backoffBase = 4 * time.Millisecond
	backoffCap  = time.Second
	// defaultTimeout bounds every Update and View of a store from Open or
	// NewMock: long enough to ride out a TiKV leader election (about ten
	// seconds with default settings), short enough that a client sees an
	// error rather than a hang when the cluster is gone.
	defaultTimeout = 10 * time.Second
)

var (
	errClosed   = fmt.Errorf("tikv engine closed: %w", meta.ErrUnavailable)
	errReadOnly = errors.New("tikv: write in a read-only transaction")
)

// Open connects to the TiKV cluster whose placement drivers (PD) listen at
// pdAddrs (host:port each) and returns the meta store kept there under
// prefix. The store asks the cluster once before returning, so that a
// wrong address fails here rather than at first use. Connecting gives up
// when ctx ends or after the same timeout that bounds every call later
// (client-go's PD client alone would keep trying for over a minute).
func Open(ctx context.Context, pdAddrs []string, prefix string) (meta.Store, error) {
	where := "TiKV via PD " + strings.Join(pdAddrs, ",")
	if len(pdAddrs) == 0 {
		return nil, fmt.Errorf("open meta store: no PD address: %w", meta.ErrInvalidArgument)
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("open meta store on %s: %w", where, err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, defaultTimeout,
		fmt.Errorf("no answer from PD within %v: %w", defaultTimeout, meta.ErrUnavailable))
	defer cancel()
	c, err := connect(cctx, pdAddrs)
	if err != nil {
		return nil, fmt.Errorf("open meta store on %s: %w", where, err)
	}
	e := newEngine(c.KVStore, prefix, defaultTimeout)
	if err := e.View(ctx, func(tx kv.Txn) error {
		_, err := tx.Get(nil)
		return err
	}); err != nil {
		e.Close()
		return nil, fmt.Errorf("open meta store on %s: %w", where, err)
	}
	return kv.New(e), nil
}

// connect creates a client of the cluster, giving up when ctx ends:
// client-go's constructor takes no context. A client that connects after
// that is closed as soon as it does.
func connect(ctx context.Context, pdAddrs []string) (*txnkv.Client, error) {
	type result struct {
		c   *txnkv.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := txnkv.NewClient(pdAddrs)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: %w", meta.ErrUnavailable, r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.c.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// NewMock returns a meta store on a fresh in-process mock cluster of
// client-go (one store, one region, data in memory): the whole client —
// transactions, region cache, 2PC — runs, only the servers are simulated.
// For tests.
func NewMock(prefix string) (meta.Store, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("mock TiKV meta store: %w", err)
	}
	s, _, err := newMockCluster()
	if err != nil {
		return nil, fmt.Errorf("mock TiKV meta store: %w", err)
	}
	return kv.New(newMockEngine(s, prefix, defaultTimeout)), nil
}

// newMockCluster starts a mock cluster and returns a client of it.
func newMockCluster() (*tikv.KVStore, *testutils.MockCluster, error) {
	client, cluster, pdClient, err := testutils.NewMockTiKV("", nil)
	if err != nil {
		return nil, nil, err
	}
	testutils.BootstrapWithSingleStore(cluster)
	s, err := tikv.NewTestTiKVStore(client, pdClient, nil, nil, 0)
	if err != nil {
		pdClient.Close()
		client.Close()
		return nil, nil, err
	}
	return s, cluster, nil
}

// checkPrefix rejects prefixes with a zero byte: the byte that ends a
// prefix must not occur in one, or one namespace could lie inside another.
func checkPrefix(prefix string) error {
	if strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("key prefix %q contains a zero byte: %w", prefix, meta.ErrInvalidArgument)
	}
	return nil
}

type engine struct {
	s       *tikv.KVStore
	prefix  []byte        // the namespace: the key prefix and a zero byte
	timeout time.Duration // bounds each Update and View
	expired error         // the cause of a call's context when timeout passes
	mock    bool          // on client-go's mock cluster (see collectMock)

	mu     sync.RWMutex // held shared by calls in flight, exclusively by Close
	closed bool
}

// newMockEngine is newEngine on a client of client-go's mock cluster.
func newMockEngine(s *tikv.KVStore, prefix string, timeout time.Duration) *engine {
	e := newEngine(s, prefix, timeout)
	e.mock = true
	return e
}

func newEngine(s *tikv.KVStore, prefix string, timeout time.Duration) *engine {
	return &engine{
		s:       s,
		prefix:  append([]byte(prefix), 0),
		timeout: timeout,
		expired: fmt.Errorf("no answer from the TiKV cluster within %v: %w", timeout, meta.ErrUnavailable),
	}
}

// A call is one Update or View in flight.
type call struct {
	ctx context.Context // the caller's, bounded by the engine's timeout
	// vars make client-go's own retry loops stop once ctx ends: some of
	// them (scans, secondary keys) run under a context of their own.
	vars *tikv.Variables
}

// start admits a call, unless the engine is closed or ctx has ended; the
// caller must call end when done.
func (e *engine) start(ctx context.Context) (c call, end func(), err error) {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return call{}, nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		e.mu.RUnlock()
		return call{}, nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.timeout, e.expired)
	killed := new(uint32)
	stop := context.AfterFunc(ctx, func() { atomic.StoreUint32(killed, 1) })
	end = func() {
		// Deregister before canceling: a call that ended in time must not
		// stop its commit's work in the background (secondary keys).
		stop()
		cancel()
		e.mu.RUnlock()
	}
	return call{ctx: ctx, vars: clientkv.NewVariables(killed)}, end, nil
}

// timestamp returns a fresh timestamp from PD, the start of a transaction
// or snapshot.
func (e *engine) timestamp(c call) (uint64, error) {
	bo := tikv.NewBackofferWithVars(c.ctx, transaction.TsoMaxBackoff, c.vars)
	return e.s.GetTimestampWithRetry(bo, oracle.GlobalTxnScope)
}

// Update runs fn in an optimistic transaction and commits it, running it
// again in a new transaction when the commit meets a write conflict.
func (e *engine) Update(ctx context.Context, fn func(kv.Txn) error) error {
	c, end, err := e.start(ctx)
	if err != nil {
		return err
	}
	defer end()
	for n := 1; ; n++ {
		tx, err := e.begin(c)
		if err != nil {
			return failed(c.ctx, "begin", err)
		}
		if err := e.run(c, tx, fn); err != nil {
			return err
		}
		err = tx.Commit(c.ctx)
		if err == nil {
			return nil
		}
		op := fmt.Sprintf("commit (attempt %d of %d)", n, attempts)
		if !conflict(err) || n == attempts {
			return failed(c.ctx, op, err)
		}
		if err := sleep(c.ctx, backoff(n)); err != nil {
			return failed(c.ctx, op, err)
		}
	}
}

// begin starts an optimistic transaction at a fresh timestamp.
func (e *engine) begin(c call) (*transaction.KVTxn, error) {
	ts, err := e.timestamp(c)
	if err != nil {
		return nil, err
	}
	tx, err := e.s.Begin(tikv.WithStartTS(ts))
	if err != nil {
		return nil, err
	}
	tx.SetVars(c.vars)
	// TiKV commits a transaction whose keys share one region in one phase,
	// and others in one round trip plus asynchronous cleanup; clusters too
	// old for either, and the mock, fall back to two-phase commit.
	tx.SetEnable1PC(true)
	tx.SetEnableAsyncCommit(true)
	return tx, nil
}

// run runs fn in tx and returns its error as it is, rolling tx back if fn
// fails or panics. (That only drops the write buffer: nothing reaches the
// cluster before Commit.)
func (e *engine) run(c call, tx *transaction.KVTxn, fn func(kv.Txn) error) error {
	ok := false
	defer func() {
		if !ok {
			tx.Rollback()
		}
	}()
	err := fn(&txn{ctx: c.ctx, prefix: e.prefix, r: tx, w: tx})
	ok = err == nil
	return err
}

// View runs fn over a snapshot at a fresh timestamp: it sees every
// transaction committed before View began.
func (e *engine) View(ctx context.Context, fn func(kv.Txn) error) error {
	c, end, err := e.start(ctx)
	if err != nil {
		return err
	}
	defer end()
	ts, err := e.timestamp(c)
	if err != nil {
		return failed(c.ctx, "begin snapshot", err)
	}
	snap := e.s.GetSnapshot(ts)
	snap.SetVars(c.vars)
	return fn(&txn{ctx: c.ctx, prefix: e.prefix, r: snap})
}

// Close waits for the calls in flight and closes the client; later calls
// fail with meta.ErrUnavailable. client-go's client must be closed once
// only, so a second Close does nothing.
func (e *engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if err := e.s.Close(); err != nil {
		return fmt.Errorf("close TiKV client: %w", err)
	}
	return nil
}

// conflict tells whether err means the transaction lost to another and
// may succeed when run again: a write conflict, or an error TiKV marks as
// retryable (such as its locks having been cleaned up meanwhile).
func conflict(err error) bool {
	var r *tikverr.ErrRetryable
	return tikverr.IsErrWriteConflict(err) || errors.As(err, &r)
}

// failed maps err, an error of client-go met in op, onto the meta
// contract: the call's end (the caller's cancellation, or meta.ErrUnavailable
// when the engine's timeout passed), meta.ErrConflict,
// meta.ErrInvalidArgument for transactions TiKV will never take, and
// meta.ErrUnavailable for everything client-go gives up on.
func failed(ctx context.Context, op string, err error) error {
	var entry *tikverr.ErrEntryTooLarge
	var txn *tikverr.ErrTxnTooLarge
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("tikv %s: %w (%v)", op, context.Cause(ctx), err)
	case conflict(err):
		return fmt.Errorf("tikv %s: %w: %w", op, meta.ErrConflict, err)
	case errors.As(err, &entry), errors.As(err, &txn):
		return fmt.Errorf("tikv %s: too large for one transaction: %w: %w", op, meta.ErrInvalidArgument, err)
	case tikverr.IsErrorUndetermined(err):
		return fmt.Errorf("tikv %s: outcome unknown, it may have been applied: %w: %w", op, meta.ErrUnavailable, err)
	}
	return fmt.Errorf("tikv %s: %w: %w", op, meta.ErrUnavailable, err)
}

// backoff returns the sleep before retry n (n ≥ 1).
func backoff(n int) time.Duration {
	return rand.N(min(backoffBase<<(n-1), backoffCap))
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reader is what a transaction and a snapshot have in common.
type reader interface {
	Get(ctx context.Context, k []byte) ([]byte, error)
	Iter(k, upperBound []byte) (tikv.Iterator, error)
}

// txn adapts a client-go transaction, or a snapshot, to kv.Txn within the
// engine's namespace.
type txn struct {
	ctx    context.Context
	prefix []byte
	r      reader
	w      *transaction.KVTxn // nil in a View
}

// key returns the cluster's key for k.
func (t *txn) key(k []byte) []byte {
	return append(t.prefix[:len(t.prefix):len(t.prefix)], k...)
}

func (t *txn) Get(k []byte) ([]byte, error) {
	v, err := t.r.Get(t.ctx, t.key(k))
	if tikverr.IsErrNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, failed(t.ctx, "get", err)
	}
	return v, nil
}

// Set writes k. TiKV cannot hold an empty value (client-go's write buffer
// takes one for a deletion), so setting one fails.
func (t *txn) Set(k, v []byte) error {
	if t.w == nil {
		return errReadOnly
	}
	if len(v) == 0 {
		return fmt.Errorf("tikv set %q: empty value: %w", k, meta.ErrInvalidArgument)
	}
	if err := t.w.Set(t.key(k), v); err != nil {
		return failed(t.ctx, "set", err)
	}
	return nil
}

func (t *txn) Delete(k []byte) error {
	if t.w == nil {
		return errReadOnly
	}
	if err := t.w.Delete(t.key(k)); err != nil {
		return failed(t.ctx, "delete", err)
	}
	return nil
}

// Scan reads [start, end) through client-go's iterator, which fetches
// batches of keys up to end from the cluster and merges the transaction's
// own writes in.
func (t *txn) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	if bytes.Compare(start, end) >= 0 {
		return nil
	}
	it, err := t.r.Iter(t.key(start), t.key(end))
	if err != nil {
		return failed(t.ctx, "scan", err)
	}
	defer it.Close()
	for it.Valid() {
		if !fn(it.Key()[len(t.prefix):], it.Value()) {
			return nil
		}
		if err := it.Next(); err != nil {
			return failed(t.ctx, "scan", err)
		}
	}
	return nil
}
