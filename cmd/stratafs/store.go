package main

import (
	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/object"
)

// openService opens the embedded default under the data directory:
// DIR/meta.db (the bolt meta store) and DIR/chunks (the chunk files).
func openService(dir string) (*object.Service, func() error, error) {
	return backend.Open(backend.Config{Dir: dir}, object.Options{})
}
