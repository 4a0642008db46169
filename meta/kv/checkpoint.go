package kv

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// spaceCheckpoint holds the checkpoints (meta.Checkpoint) by name:
//
//	R name → MarshalCheckpoint
const spaceCheckpoint byte = 'R'

// SaveCheckpoint stores c under its name.
func (s *Store) SaveCheckpoint(ctx context.Context, c meta.Checkpoint) error {
	data, err := meta.MarshalCheckpoint(c)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error { return tx.Set(nameKey(spaceCheckpoint, c.Name), data) })
	}
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", c.Name, err)
	}
	return nil
}

// Checkpoint returns the named checkpoint.
func (s *Store) Checkpoint(ctx context.Context, name string) (meta.Checkpoint, error) {
	var c meta.Checkpoint
	err := meta.ValidCheckpointName(name)
	if err == nil {
		err = s.e.View(ctx, func(tx Txn) (err error) {
			c, err = get(tx, nameKey(spaceCheckpoint, name), meta.ErrNoSuchCheckpoint, unmarshalCheckpoint)
			return err
		})
	}
	if err != nil {
		return meta.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return c, nil
}

// DeleteCheckpoint removes the named checkpoint, if there is one.
func (s *Store) DeleteCheckpoint(ctx context.Context, name string) error {
	err := meta.ValidCheckpointName(name)
	if err == nil {
		err = s.e.Update(ctx, func(tx Txn) error { return tx.Delete(nameKey(spaceCheckpoint, name)) })
	}
	if err != nil {
		return fmt.Errorf("delete checkpoint %s: %w", name, err)
	}
	return nil
}

// unmarshalCheckpoint decodes a checkpoint and checks it against its key.
func unmarshalCheckpoint(k, v []byte) (meta.Checkpoint, error) {
	name, err := decodeNameKey(k, spaceCheckpoint)
	if err != nil {
		return meta.Checkpoint{}, err
	}
	c, err := meta.UnmarshalCheckpoint(v)
	if err == nil && c.Name != name {
		err = fmt.Errorf("%w: checkpoint %q stored under %q", meta.ErrCorrupt, c.Name, name)
	}
	return c, err
}
