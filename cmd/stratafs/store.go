package main

import (
	"os"

	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/object"
)

// openService opens the stores every command works on: by default the
// embedded pair under the data directory (DIR/meta.db and DIR/chunks);
// STRATAFS_META and STRATAFS_DATA name others by URL (backend.Config).
func openService(dir string) (*object.Service, func() error, error) {
	return backend.Open(backend.Config{
		Dir:  dir,
		Meta: os.Getenv("STRATAFS_META"),
		Data: os.Getenv("STRATAFS_DATA"),
	}, object.Options{})
}
