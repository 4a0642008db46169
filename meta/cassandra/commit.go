package cassandra

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/stratafs/stratafs/meta"
)

// errIDTaken refuses a Put whose id names an existing row.
var errIDTaken = fmt.Errorf("version id already in use: %w", meta.ErrInvalidArgument)

// Commit checks every mutation against the current state, then applies
// them one by one, each as one conditional batch in its key's partition
// (see the package documentation for what that leaves open). A failing
// check, or a mutation that cannot apply (a missing row, an upload that
// is not Completing), leaves nothing applied. A mutation of a key that an
// earlier mutation of the same commit changes is checked only when it is
// applied.
func (s *Store) Commit(ctx context.Context, b meta.Bucket, ms ...meta.Mutation) error {
	if len(ms) == 0 {
		return nil
	}
	n, err := shards(b)
	if err != nil {
		return fmt.Errorf("commit %s: %w", b.Name, err)
	}
	for _, m := range ms {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("commit %s/%s: %w", b.Name, m.Key, err)
		}
	}
	// Puts that share another row's manifest read it first: a directory
	// renamed in the mount makes a commit of thousands.
	puts := make([][]byte, len(ms))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, m := range ms {
		if m.Put == nil {
			continue
		}
		g.Go(func() error {
			var err error
			if puts[i], err = s.marshalPut(gctx, b, m.Put); err != nil {
				return fmt.Errorf("commit %s/%s: %w", b.Name, m.Key, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The bucket check runs beside the first reads; writes wait for it.
	// Commit waits for it whatever happens, so it never outlives the call.
	live := make(chan error, 1)
	go func() { live <- s.bounded(ctx, func(ctx context.Context) error { return s.liveBucket(ctx, b) }) }()
	bucketOK := sync.OnceValue(func() error { return <-live })
	muts := make([]mutation, len(ms))
	for i, m := range ms {
		muts[i] = mutation{Mutation: m, put: puts[i], shard: shardOf(m.Key, n), bucketOK: bucketOK}
	}
	err = s.commit(ctx, b, muts)
	// A bucket that is gone explains any other failure.
	if berr := bucketOK(); berr != nil {
		return fmt.Errorf("commit %s: %w", b.Name, berr)
	}
	return err
}

// marshalPut encodes p, reading first the row whose manifest it shares,
// if it names one: with the checks, before any mutation applies, so a
// row the same commit writes cannot be shared (meta.Store.Commit).
func (s *Store) marshalPut(ctx context.Context, b meta.Bucket, p *meta.Version) ([]byte, error) {
	if ref := p.ManifestOf; ref != nil {
		origin, err := s.Get(ctx, b, ref.Key, ref.ID)
		if errors.Is(err, meta.ErrNoSuchVersion) {
			origin, err = nil, nil
		}
		if err == nil {
			p, err = p.Sharing(origin)
		}
		if err != nil {
			return nil, err
		}
	}
	return meta.MarshalVersion(p)
}

// commit checks and then applies muts. Each step has the store's timeout
// to itself, as a commit may have many.
func (s *Store) commit(ctx context.Context, b meta.Bucket, muts []mutation) error {
	seen := make(map[string]bool, len(muts))
	for i := range muts {
		mu := &muts[i]
		err := s.bounded(ctx, func(ctx context.Context) error {
			err := s.completing(ctx, b, mu)
			// One mutation checks itself as it applies.
			if err == nil && len(muts) > 1 && !seen[mu.Key] {
				_, err = s.plan(ctx, b, mu, nil)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("commit %s/%s: %w", b.Name, mu.Key, err)
		}
		seen[mu.Key] = true
	}
	for i := range muts {
		mu := &muts[i]
		err := s.bounded(ctx, func(ctx context.Context) error { return s.applyRows(ctx, b, mu) })
		if err == nil && mu.CompleteUpload != "" {
			err = s.bounded(ctx, func(ctx context.Context) error { return s.finishUpload(ctx, b, mu) })
		}
		if err != nil {
			return fmt.Errorf("commit %s/%s: %w", b.Name, mu.Key, err)
		}
	}
	return nil
}

// A mutation is a meta.Mutation on its way into the store.
type mutation struct {
	meta.Mutation
	put   []byte // Put, encoded
	shard int
	// resume is set when the mutation completes an upload whose version
	// row it writes may be there already: a Complete that wrote the row
	// and then failed to finish the upload is being repeated.
	resume bool
	// bucketOK waits for the check that the bucket still exists.
	bucketOK func() error
}

// completing checks that the upload mu completes, if any, is Completing,
// and notes whether its row may exist already.
func (s *Store) completing(ctx context.Context, b meta.Bucket, mu *mutation) error {
	if mu.CompleteUpload == "" {
		return nil
	}
	u, _, err := s.upload(ctx, s.cons, b, mu.shard, mu.Key, mu.CompleteUpload)
	if err == nil && u.State != meta.Completing {
		err = fmt.Errorf("upload %s is %s, not completing: %w", u.ID, u.State, meta.ErrNoSuchUpload)
	}
	if err != nil {
		return err
	}
	mu.resume = mu.Put != nil && u.Version == mu.Put.ID
	return nil
}

// applyRows applies mu's change to its key's rows as one conditional
// batch, retrying while other writers of the key come between its read
// and its write.
func (s *Store) applyRows(ctx context.Context, b meta.Bucket, mu *mutation) error {
	tok := make([]byte, 16)
	rand.Read(tok)
	var prev []byte // the token the last write attempted to replace
	return s.lwt(ctx, partition{tableObjects, b.ID, mu.shard}, func(unsure bool) (bool, error) {
		st, err := s.readKey(ctx, b, mu)
		if err != nil {
			return false, err
		}
		if unsure {
			// A write of unknown outcome took effect if the key carries
			// its token, or if the row it puts, whose id no one else
			// uses, is there. Without a row to look for, the token
			// having moved on from the one it replaced means another
			// writer came after it, or instead of it: no telling which.
			switch {
			case bytes.Equal(st.seq, tok):
				return true, nil
			case mu.Put == nil && !bytes.Equal(st.seq, prev):
				return false, fmt.Errorf("outcome unknown: a write timed out and another writer's followed: %w", meta.ErrUnavailable)
			}
			mu.resume = mu.resume || mu.Put != nil
		}
		c, err := s.plan(ctx, b, mu, st)
		if err != nil || c == nil {
			return err == nil, err
		}
		if err := mu.bucketOK(); err != nil {
			return false, err
		}
		prev = st.seq
		return s.execCAS(ctx, s.batch(b, mu, st, c, tok)...)
	})
}

// A change is what a mutation does to its key's rows.
type change struct {
	gone  [][]byte // ids of the rows it removes
	null  []byte   // the id of the key's null row after it; nil for none
	empty bool     // it leaves the key without rows
}

// batch returns the conditional batch that makes change c to the key in
// state st, replacing the head's token with tok: the condition is that
// the token is still the one st read, or that there is no head row if
// st found none. A key left empty loses its head row.
func (s *Store) batch(b meta.Bucket, mu *mutation, st *keyState, c *change, tok []byte) []stmt {
	bid, k := int64(b.ID), []byte(mu.Key)
	var stmts []stmt
	switch {
	case !st.head:
		stmts = append(stmts, stmt{s.q.insertHead, []any{bid, mu.shard, k, tok, c.null}})
	case c.empty:
		stmts = append(stmts, stmt{s.q.deleteHead, []any{bid, mu.shard, k, st.seq}})
	default:
		stmts = append(stmts, stmt{s.q.updateHead, []any{tok, c.null, bid, mu.shard, k, st.seq}})
	}
	if mu.Put != nil {
		stmts = append(stmts, stmt{s.q.insertRow, []any{bid, mu.shard, k, mu.Put.ID[:], mu.put}})
	}
	for _, id := range c.gone {
		stmts = append(stmts, stmt{s.q.deleteRow, []any{bid, mu.shard, k, id}})
	}
	return stmts
}

// keyState is what a mutation reads of its key with a serial read: the
// head row and the first rows.
type keyState struct {
	head bool   // the head row exists: the key has rows
	seq  []byte // the head's token
	null []byte // the id of the null row; nil if there is none
	rows []item // the first rows, newest first
	all  bool   // rows holds every row of the key
}

// readKey reads mu's key with a serial read, which also completes any
// conditional write of the partition still in flight.
func (s *Store) readKey(ctx context.Context, b meta.Bucket, mu *mutation) (*keyState, error) {
	k := []byte(mu.Key)
	it := s.session.Query(s.q.keyState, int64(b.ID), mu.shard, k, k).Consistency(s.serial).IterContext(ctx)
	st := &keyState{}
	var (
		kind            int8
		id, row, seq, n []byte
	)
	for it.Scan(&kind, &id, &row, &seq, &n) {
		if kind == 0 {
			st.head, st.seq, st.null = true, seq, n
		} else {
			st.rows = append(st.rows, item{pos{mu.Key, id}, row})
		}
		id, row, seq, n = nil, nil, nil, nil
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	st.all = len(st.rows) < 3
	return st, nil
}

// plan decides mu against its key's state st (read here if nil): it runs
// Check and returns the change mu makes, nil if none.
func (s *Store) plan(ctx context.Context, b meta.Bucket, mu *mutation, st *keyState) (*change, error) {
	var err error
	if st == nil {
		if st, err = s.readKey(ctx, b, mu); err != nil {
			return nil, err
		}
	}
	var head *meta.Version // for Check: its attributes only
	if len(st.rows) > 0 {
		if head, err = unmarshalRow(meta.VersionAttrs(st.rows[0].data), mu.Key, st.rows[0].id); err != nil {
			return nil, err
		}
		head.DropManifest()
	}
	exists, err := s.exist(ctx, b, mu, st)
	if err != nil {
		return nil, err
	}
	if mu.Put != nil && mu.resume && exists[string(mu.Put.ID[:])] {
		return nil, nil // this mutation's own earlier write
	}
	if mu.Check != nil {
		if err := mu.Check(head); err != nil {
			return nil, err
		}
	}
	c := &change{null: st.null}
	remove := func(id []byte) {
		c.gone = append(c.gone, id)
		if bytes.Equal(id, c.null) {
			c.null = nil
		}
	}
	if mu.DropNull && c.null != nil {
		remove(c.null)
	}
	if !mu.Delete.IsZero() {
		id := mu.Delete[:]
		if !exists[string(id)] || len(c.gone) > 0 && bytes.Equal(c.gone[0], id) {
			return nil, fmt.Errorf("version %s: %w", mu.Delete, meta.ErrNoSuchVersion)
		}
		remove(id)
	}
	if p := mu.Put; p != nil {
		switch {
		case exists[string(p.ID[:])]:
			return nil, fmt.Errorf("version %s: %w", p.ID, errIDTaken)
		case p.Null && c.null != nil:
			return nil, fmt.Errorf("null version %x exists and the mutation does not drop it: %w", c.null, meta.ErrInvalidArgument)
		case p.Null:
			c.null = p.ID[:]
		}
	} else if len(c.gone) == 0 {
		return nil, nil
	}
	c.empty = mu.Put == nil && st.all && len(c.gone) == len(st.rows)
	return c, nil
}

// exist reports which of the rows mu deletes and puts exist, reading
// those that st does not settle: when the key has more rows than st
// holds, those that sort after the last of them.
func (s *Store) exist(ctx context.Context, b meta.Bucket, mu *mutation, st *keyState) (map[string]bool, error) {
	exists := map[string]bool{}
	for _, r := range st.rows {
		exists[string(r.id)] = true
	}
	var ask [][]byte
	for _, id := range []meta.VersionID{mu.Delete, putID(mu)} {
		if !id.IsZero() && !st.all && bytes.Compare(id[:], st.rows[len(st.rows)-1].id) > 0 {
			ask = append(ask, bytes.Clone(id[:]))
		}
	}
	if len(ask) == 0 {
		return exists, nil
	}
	it := s.session.Query(s.q.rows, int64(b.ID), mu.shard, []byte(mu.Key), ask).IterContext(ctx)
	var id, row []byte
	for it.Scan(&id, &row) {
		exists[string(id)] = true
	}
	return exists, it.Close()
}

func putID(mu *mutation) meta.VersionID {
	if mu.Put == nil {
		return meta.VersionID{}
	}
	return mu.Put.ID
}

// Get returns the row (key, id).
func (s *Store) Get(ctx context.Context, b meta.Bucket, key string, id meta.VersionID) (*meta.Version, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	v, err := s.getRow(ctx, b, key, id[:])
	if err != nil {
		return nil, fmt.Errorf("get %s/%s@%s: %w", b.Name, key, id, s.wrap(ctx, err))
	}
	return v, nil
}

// GetNull returns the null row of key, which the key's head row names.
func (s *Store) GetNull(ctx context.Context, b meta.Bucket, key string) (*meta.Version, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := shards(b)
	var id []byte
	if err == nil {
		err = s.session.Query(s.q.nullID, int64(b.ID), shardOf(key, n), blob(key)).ScanContext(ctx, &id)
	}
	var v *meta.Version
	switch {
	case errors.Is(err, gocql.ErrNotFound) || err == nil && id == nil:
		err = meta.ErrNoSuchVersion
	case err == nil:
		v, err = s.getRow(ctx, b, key, id)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s/%s@null: %w", b.Name, key, s.wrap(ctx, err))
	}
	return v, nil
}

// getRow reads the row (key, id).
func (s *Store) getRow(ctx context.Context, b meta.Bucket, key string, id []byte) (*meta.Version, error) {
	n, err := shards(b)
	if err != nil {
		return nil, err
	}
	var got, row []byte
	err = s.session.Query(s.q.rows, int64(b.ID), shardOf(key, n), blob(key), [][]byte{id}).ScanContext(ctx, &got, &row)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, meta.ErrNoSuchVersion
	}
	if err != nil {
		return nil, err
	}
	return unmarshalRow(row, key, id)
}
