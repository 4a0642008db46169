package meta

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

// A Checkpoint is where a long job over every bucket's keys (the
// collector's retention pass) got to: the last key of a bucket it
// finished. It lives in the meta store so that the next run, in whichever
// process sharing the store takes the job's lease, can start there rather
// than at the first bucket.
//
// It is advisory: its writes are not fenced by the lease, so one saved
// late by a holder that lost the lease may replace a newer one or
// outlive a delete. A job must be correct whatever checkpoint it finds,
// or none (the collector only chooses where its full pass begins).
type Checkpoint struct {
	Name   string    // the job's (the collector's lease name)
	Holder string    // who saved it
	Saved  time.Time // when, by the holder's clock
	Bucket uint64    // the bucket's ID, which never repeats: a bucket created again under its name is another
	Key    string
}

// Checkpoints is the part of the meta contract (embedded in Store) that
// keeps checkpoints. They belong to no bucket: deleting one leaves them.
type Checkpoints interface {
	// SaveCheckpoint stores c under c.Name, replacing the one there.
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	// Checkpoint returns the named checkpoint or ErrNoSuchCheckpoint.
	Checkpoint(ctx context.Context, name string) (Checkpoint, error)
	// DeleteCheckpoint removes the named checkpoint; one that is not
	// there is no error.
	DeleteCheckpoint(ctx context.Context, name string) error
}

// ValidCheckpointName checks the name a checkpoint is kept under.
func ValidCheckpointName(name string) error {
	if name == "" {
		return fmt.Errorf("checkpoint name must not be empty: %w", ErrInvalidArgument)
	}
	return nil
}

// MarshalCheckpoint validates and encodes c for storage.
func MarshalCheckpoint(c Checkpoint) ([]byte, error) {
	err := ValidCheckpointName(c.Name)
	if err == nil {
		err = ValidKey(c.Key)
	}
	var saved *int64
	if err == nil {
		saved, err = unixNanos(c.Saved)
	}
	var data []byte
	if err == nil {
		data, err = encode(&metapb.Checkpoint{Name: c.Name, Holder: c.Holder, SavedUnixNanos: saved, BucketId: c.Bucket, Key: c.Key})
	}
	if err != nil {
		return nil, fmt.Errorf("marshal checkpoint %q: %w", c.Name, err)
	}
	return data, nil
}

// UnmarshalCheckpoint decodes and validates a stored checkpoint.
func UnmarshalCheckpoint(data []byte) (Checkpoint, error) {
	var pb metapb.Checkpoint
	if err := proto.Unmarshal(data, &pb); err != nil {
		return Checkpoint{}, corrupt("checkpoint", err)
	}
	c := Checkpoint{Name: pb.Name, Holder: pb.Holder, Saved: fromUnixNanos(pb.SavedUnixNanos), Bucket: pb.BucketId, Key: pb.Key}
	err := ValidCheckpointName(c.Name)
	if err == nil {
		err = ValidKey(c.Key)
	}
	if err != nil {
		return Checkpoint{}, corrupt("checkpoint", err)
	}
	return c, nil
}
