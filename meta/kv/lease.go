package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// errNoLease marks an absent lease inside a transaction; callers never
// see it.
var errNoLease = errors.New("no lease")

// AcquireLease gives the named lease to holder until now+ttl if it is
// free, expired or holder's already, in one transaction.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (meta.Lease, error) {
	var cur meta.Lease
	want, data, err := meta.NewLease(name, holder, now, ttl)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			k := nameKey(spaceLease, name)
			var err error
			cur, err = get(tx, k, errNoLease, unmarshalLease)
			switch {
			case errors.Is(err, errNoLease):
			case err != nil:
				return err
			case cur.HeldAgainst(holder, now):
				return meta.ErrLeaseHeld
			}
			return tx.Set(k, data)
		})
	}
	if errors.Is(err, meta.ErrLeaseHeld) {
		return cur, fmt.Errorf("lease %s: held by %s until %s: %w", name, cur.Holder, cur.Expires.Format(time.RFC3339), err)
	}
	if err != nil {
		return meta.Lease{}, fmt.Errorf("acquire lease %s for %s: %w", name, holder, err)
	}
	return want, nil
}

// ReleaseLease removes the named lease if holder has it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := meta.ValidLease(name, holder)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error {
			k := nameKey(spaceLease, name)
			cur, err := get(tx, k, errNoLease, unmarshalLease)
			switch {
			case errors.Is(err, errNoLease):
				return nil
			case err != nil:
				return err
			case cur.Holder != holder:
				return fmt.Errorf("held by %s: %w", cur.Holder, meta.ErrLeaseHeld)
			}
			return tx.Delete(k)
		})
	}
	if err != nil {
		return fmt.Errorf("release lease %s for %s: %w", name, holder, err)
	}
	return nil
}

// unmarshalLease decodes a lease record and checks it against its key.
func unmarshalLease(k, v []byte) (meta.Lease, error) {
	name, err := decodeNameKey(k, spaceLease)
	if err != nil {
		return meta.Lease{}, err
	}
	l, err := meta.UnmarshalLease(v)
	if err == nil && l.Name != name {
		err = fmt.Errorf("%w: lease %q stored under %q", meta.ErrCorrupt, l.Name, name)
	}
	return l, err
}
