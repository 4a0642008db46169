package kv

import (
	"context"
	"time"

	"github.com/stratafs/stratafs/meta"
)

var _ meta.Compactor = (*Store)(nil)

// Compact passes on to the engine when it keeps old versions of its keys
// (it implements meta.Compactor, as TiKV's does); otherwise there is
// nothing to discard.
func (s *Store) Compact(ctx context.Context, before time.Time) error {
	if c, ok := s.e.(meta.Compactor); ok {
		return c.Compact(ctx, before)
	}
	return nil
}
