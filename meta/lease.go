package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

// ErrLeaseHeld means another holder has the lease and it has not expired.
var ErrLeaseHeld = errors.New("lease held by another holder")

// A Lease is a named lock with an expiry, kept in the meta store so that
// processes sharing a store (several gateways on TiKV) can agree that at
// most one of them does a job, the collector's above all. A holder keeps
// it by renewing it well before it expires; one that stops renewing (a
// crash, a partition) loses it once it expires, without anyone's help.
type Lease struct {
	Name    string
	Holder  string
	Expires time.Time
}

// Leases is the part of the meta contract (embedded in Store) that keeps
// leases. Expiry is judged with the caller's clock (now): holders must
// run on clocks that agree to well within the lease's time to live.
type Leases interface {
	// AcquireLease gives the named lease to holder until now+ttl, under
	// compare-and-set, if it is free, expired at now, or already held by
	// holder (a renewal). Otherwise it returns the current lease and
	// ErrLeaseHeld.
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (Lease, error)
	// ReleaseLease frees the lease if holder has it. A lease that is not
	// there is no error; one another holder has (it expired and was taken
	// over) is ErrLeaseHeld and is left alone.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// ValidLease checks the names a lease is taken under.
func ValidLease(name, holder string) error {
	if name == "" || holder == "" {
		return fmt.Errorf("lease name and holder must not be empty: %w", ErrInvalidArgument)
	}
	return nil
}

// NewLease validates a request for the named lease and returns the record
// holder would get, until now+ttl, encoded for storage: the part of
// AcquireLease every backend shares.
func NewLease(name, holder string, now time.Time, ttl time.Duration) (Lease, []byte, error) {
	if err := ValidLease(name, holder); err != nil {
		return Lease{}, nil, err
	}
	if ttl <= 0 {
		return Lease{}, nil, fmt.Errorf("ttl %v: %w", ttl, ErrInvalidArgument)
	}
	l := Lease{Name: name, Holder: holder, Expires: now.Add(ttl)}
	data, err := MarshalLease(l)
	return l, data, err
}

// HeldAgainst reports whether the lease, as stored, keeps holder out at
// now: another holder has it and it has not expired.
func (l Lease) HeldAgainst(holder string, now time.Time) bool {
	return l.Holder != holder && now.Before(l.Expires)
}

// MarshalLease encodes l for storage.
func MarshalLease(l Lease) ([]byte, error) {
	if err := ValidLease(l.Name, l.Holder); err != nil {
		return nil, fmt.Errorf("marshal lease %q: %w", l.Name, err)
	}
	expires, err := unixNanos(l.Expires)
	if err != nil {
		return nil, fmt.Errorf("marshal lease %q: expires: %w", l.Name, err)
	}
	data, err := encode(&metapb.Lease{Name: l.Name, Holder: l.Holder, ExpiresUnixNanos: expires})
	if err != nil {
		return nil, fmt.Errorf("marshal lease %q: %w", l.Name, err)
	}
	return data, nil
}

// UnmarshalLease decodes and validates a stored lease.
func UnmarshalLease(data []byte) (Lease, error) {
	var pb metapb.Lease
	if err := proto.Unmarshal(data, &pb); err != nil {
		return Lease{}, corrupt("lease", err)
	}
	l := Lease{Name: pb.Name, Holder: pb.Holder, Expires: fromUnixNanos(pb.ExpiresUnixNanos)}
	if err := ValidLease(l.Name, l.Holder); err != nil {
		return Lease{}, corrupt("lease", err)
	}
	return l, nil
}
