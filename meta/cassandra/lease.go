package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratafs/stratafs/meta"
)

var leasesPartition = partition{table: tableLeases}

// errLeaseHeld carries the lease that another holder has.
type errLeaseHeld struct{ cur meta.Lease }

func (e errLeaseHeld) Error() string {
	return fmt.Sprintf("held by %s until %s: %v", e.cur.Holder, e.cur.Expires.Format(time.RFC3339), meta.ErrLeaseHeld)
}
func (e errLeaseHeld) Unwrap() error { return meta.ErrLeaseHeld }

// lease reads the named lease with a serial read: nil data if absent.
func (s *Store) lease(ctx context.Context, name string) (meta.Lease, []byte, error) {
	data, err := s.getAt(ctx, s.serial, s.q.lease, s.ns, name)
	if err != nil || data == nil {
		return meta.Lease{}, nil, err
	}
	l, err := meta.UnmarshalLease(data)
	if err == nil && l.Name != name {
		err = fmt.Errorf("%w: lease %q stored under %q", meta.ErrCorrupt, l.Name, name)
	}
	return l, data, err
}

// AcquireLease gives the named lease to holder until now+ttl if it is
// free, expired or holder's already, under compare-and-set against the
// record it read.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (meta.Lease, error) {
	want, data, err := meta.NewLease(name, holder, now, ttl)
	if err == nil {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		err = s.wrap(ctx, s.lwt(ctx, leasesPartition, func(unsure bool) (bool, error) {
			cur, old, err := s.lease(ctx, name)
			switch {
			case err != nil:
				return false, err
			case unsure && bytes.Equal(old, data):
				return true, nil
			case old != nil && cur.HeldAgainst(holder, now):
				return false, errLeaseHeld{cur}
			case old == nil:
				return s.session.Query(s.q.createLease, s.ns, name, data).MapScanCASContext(ctx, map[string]any{})
			}
			return s.session.Query(s.q.updateLease, data, s.ns, name, old).MapScanCASContext(ctx, map[string]any{})
		}))
	}
	if held := (errLeaseHeld{}); errors.As(err, &held) {
		return held.cur, fmt.Errorf("lease %s: %w", name, err)
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
		ctx, cancel := s.bound(ctx)
		defer cancel()
		err = s.wrap(ctx, s.lwt(ctx, leasesPartition, func(bool) (bool, error) {
			cur, old, err := s.lease(ctx, name)
			switch {
			case err != nil:
				return false, err
			case old == nil:
				return true, nil
			case cur.Holder != holder:
				return false, errLeaseHeld{cur}
			}
			return s.session.Query(s.q.deleteLease, s.ns, name, old).MapScanCASContext(ctx, map[string]any{})
		}))
	}
	if err != nil {
		return fmt.Errorf("release lease %s for %s: %w", name, holder, err)
	}
	return nil
}
