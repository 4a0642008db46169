package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// openService opens the embedded default under the data directory:
// DIR/meta.db (the bolt meta store) and DIR/chunks (the chunk files).
func openService(dir string) (*object.Service, func() error, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	m, err := bolt.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		return nil, nil, err
	}
	d, err := local.Open(dir)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	closeAll := func() error {
		derr := d.Close()
		if err := m.Close(); err != nil {
			return err
		}
		return derr
	}
	return object.New(m, d, object.Options{}), closeAll, nil
}
