package cassandra

import (
	"context"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// Checkpoints (meta.Checkpoint) are the table checkpoints, ((ns), name)
// → data, one partition per namespace like the leases. They are advisory,
// so their writes are plain, not LWT, stamped with the ledger's clock
// (strictly increasing in the process) so that a delete is never ordered
// before the save it follows by the coordinators' clocks.

// checkpointQuery returns a statement on the checkpoints table.
func (s *Store) checkpointQuery(format string) string {
	return fmt.Sprintf(format, s.q.keyspace+".checkpoints")
}

// SaveCheckpoint writes c under its name.
func (s *Store) SaveCheckpoint(ctx context.Context, c meta.Checkpoint) error {
	data, err := meta.MarshalCheckpoint(c)
	if err == nil {
		err = s.bounded(ctx, func(ctx context.Context) error {
			return s.session.Query(s.checkpointQuery(`INSERT INTO %s (ns, name, data) VALUES (?, ?, ?)`), s.ns, c.Name, data).
				WithTimestamp(ledgerTimestamp()).ExecContext(ctx)
		})
	}
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", c.Name, err)
	}
	return nil
}

// Checkpoint reads the named checkpoint.
func (s *Store) Checkpoint(ctx context.Context, name string) (meta.Checkpoint, error) {
	var c meta.Checkpoint
	err := meta.ValidCheckpointName(name)
	if err == nil {
		err = s.bounded(ctx, func(ctx context.Context) error {
			data, err := s.get(ctx, s.checkpointQuery(`SELECT data FROM %s WHERE ns = ? AND name = ?`), s.ns, name)
			switch {
			case err != nil:
				return err
			case data == nil:
				return meta.ErrNoSuchCheckpoint
			}
			if c, err = meta.UnmarshalCheckpoint(data); err == nil && c.Name != name {
				err = fmt.Errorf("%w: checkpoint %q stored under %q", meta.ErrCorrupt, c.Name, name)
			}
			return err
		})
	}
	if err != nil {
		return meta.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return c, nil
}

// DeleteCheckpoint removes the named checkpoint.
func (s *Store) DeleteCheckpoint(ctx context.Context, name string) error {
	err := meta.ValidCheckpointName(name)
	if err == nil {
		err = s.bounded(ctx, func(ctx context.Context) error {
			return s.session.Query(s.checkpointQuery(`DELETE FROM %s WHERE ns = ? AND name = ?`), s.ns, name).
				WithTimestamp(ledgerTimestamp()).ExecContext(ctx)
		})
	}
	if err != nil {
		return fmt.Errorf("delete checkpoint %s: %w", name, err)
	}
	return nil
}
